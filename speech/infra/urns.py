"""Resource URNs and aliases as the Pulumi engine forms them, from a mocked preview's registrations.

Pulumi's mock monitor names a resource by its immediate parent's type only and writes the root
stack's type into top-level URNs; the engine qualifies a type by every ancestor's type below the
stack (``urn:pulumi:<stack>::<project>::<ancestor types $ ...>$<type>::<name>``, Pulumi docs,
"Resource names" / URNs, https://www.pulumi.com/docs/iac/concepts/resources/names/#urns). With
alias specs (the SDK sends specs once the monitor supports them, which the mock monitor does) the
engine, not the SDK, also derives the aliases of a moved resource's descendants: each descendant
gets, for every URN its parent had (the parent's URN and each of its aliases), the URN it would have
had under that parent, combined with its own alias specs (the rule the SDK applies itself where a
monitor takes no specs: ``pulumi.runtime.resource.all_aliases``, "(M+1)*(N+1)-1 total aliases").
:func:`engine_urns` applies both rules to every registration, so a test can show that every URN a
deployed stack holds maps to one resource of the new program."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EngineUrn:
    urn: str
    """The URN the engine gives the resource."""
    aliases: frozenset[str]
    """Every earlier URN the engine moves to :attr:`urn`: the resource's own alias specs and those
    inherited from its ancestors' aliases."""


def _qualified_type(urn: str) -> str:
    return urn.split("::")[2]


def make_urn(stack: str, project: str, parent: str | None, type_: str, name: str) -> str:
    """The engine's URN of ``type_``/``name`` under ``parent`` (None: the root stack)."""
    qualified = type_ if parent is None else f"{_qualified_type(parent)}${type_}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def engine_urns(resources: Sequence[Any], stack: str, project: str) -> dict[str, EngineUrn]:
    """Mock URN -> :class:`EngineUrn` of each registration (``urn``, ``parent``, ``type``, ``name``,
    ``alias_specs`` as :class:`speech.infra.preview.RegisteredResource` has them). The root stack
    itself (``pulumi:pulumi:Stack``) is the parent of top-level resources and has no URN of its own
    here."""
    by_urn = {r.urn: r for r in resources}
    root = {r.urn for r in resources if r.type == "pulumi:pulumi:Stack"}
    out: dict[str, EngineUrn] = {}

    def parent_of(r: Any) -> Any:
        return None if not r.parent or r.parent in root else by_urn.get(r.parent)

    def resolve(r: Any) -> EngineUrn:
        if r.urn in out:
            return out[r.urn]
        parent = parent_of(r)
        parent_urns: list[str | None]
        if parent is None:
            parent_urns, current = [None], None
        else:
            p = resolve(parent)
            current = p.urn
            parent_urns = [p.urn, *sorted(p.aliases)]
        urn = make_urn(stack, project, current, r.type, r.name)
        aliases: set[str] = set()
        # Inherited: the same type and name under each URN the parent had.
        aliases.update(make_urn(stack, project, pu, r.type, r.name) for pu in parent_urns[1:])
        for spec in r.alias_specs:
            if spec.get("urn"):
                aliases.add(spec["urn"])
                continue
            t, n = spec.get("type") or r.type, spec.get("name") or r.name
            if spec.get("no_parent"):
                aliases.add(make_urn(stack, project, None, t, n))
            elif spec.get("parent"):
                named = by_urn.get(spec["parent"])
                given = resolve(named) if named is not None and named.urn not in root else None
                targets = [None] if given is None else [given.urn, *sorted(given.aliases)]
                aliases.update(make_urn(stack, project, pu, t, n) for pu in targets)
            else:
                aliases.update(make_urn(stack, project, pu, t, n) for pu in parent_urns)
        aliases.discard(urn)
        out[r.urn] = EngineUrn(urn=urn, aliases=frozenset(aliases))
        return out[r.urn]

    for r in resources:
        if r.type != "pulumi:pulumi:Stack":
            resolve(r)
    return out


def old_urn_from_mock(urn: str) -> str:
    """A URN pinned in the mock monitor's form, as the engine wrote it: top-level resources carry
    no ``pulumi:pulumi:Stack$`` (pinned URNs are at most one level below a top-level component, where
    the mock's immediate-parent type is the whole chain)."""
    return urn.replace("::pulumi:pulumi:Stack$", "::", 1)
