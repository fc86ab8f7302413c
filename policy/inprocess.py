"""The pack's policies called in process, the way pulumi-policy's own tests call a policy.

pulumi-policy tests a policy by calling ``policy.validate(args, report)`` with a ``report`` that
collects the messages (sdk/python/lib/test/test_policy.py in pulumi/pulumi-policy). Every rule of
this pack is a pure function of the stack, so most of its tests need no pack process: this module
builds the same ``ResourceValidationArgs`` / ``StackValidationArgs`` the analyzer servicer builds
(properties through a protobuf Struct and pulumi_policy's unknown-checking proxy, config
reconciled as the engine does), calls each policy of :data:`policy.policies.POLICIES` and collects
what it reports into the harness's :class:`~policy.harness.Report`.

What stays with the real pack process (:class:`policy.harness.PackClient`): that the process
starts, registers the same policies over gRPC, and that a preview through the analyzer protocol
reports what this module reports (tests/policy/test_end_to_end.py compares the two).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from inspect import isawaitable
from typing import Any

from google.protobuf import json_format
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from policy.harness import Diagnostic, Report, Resource, policy_info, reconcile, to_struct

PACK_VERSION = "0.0.1"
"""What pulumi_policy's PolicyPack reports as its version without a PulumiPolicy.yaml."""


def _wire(props: Mapping[str, Any]) -> dict[str, Any]:
    # The engine sends properties as a Struct: numbers arrive as floats, unknowns as the sentinel.
    return json_format.MessageToDict(to_struct(props))


def _props(wire: Mapping[str, Any]) -> Any:
    # As the servicer does for each policy: a fresh deserialized copy behind the unknown-checking
    # proxy (deserialize_properties builds new containers, so one wire form serves every policy).
    return unknown_checking_proxy(deserialize_properties(dict(wire)))


def _options(resource: Resource) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                                 custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[],
                                 parent=resource.parent or None)


def _run(validate: Any, args: Any, report: Any) -> None:
    result = validate(args, report)
    if isawaitable(result):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(result)
        finally:
            loop.close()


class InProcessPack:
    """The policies of :data:`policy.policies.POLICIES`, called directly; same ``check`` and
    ``policies`` as :class:`policy.harness.PackClient`."""

    def __init__(self, *, stack: str = "dev", project: str = "speech-endpoints", pack_name: str | None = None) -> None:
        from policy.policies import PACK_NAME, POLICIES

        self.stack, self.project = stack, project
        self.pack_name = pack_name or PACK_NAME
        self._policies = list(POLICIES)

    @property
    def policies(self) -> dict[str, dict[str, Any]]:
        """name -> {level, schema, defaults}, as :attr:`PackClient.policies` reads them from GetAnalyzerInfo."""
        out = {}
        for p in self._policies:
            schema = dict(p.config_schema.properties) if p.config_schema is not None else {}
            level = p.enforcement_level or EnforcementLevel.MANDATORY  # the pack's level (policy/__main__.py)
            out[p.name] = policy_info(level.value, schema)
        return out

    def reconcile(self, config: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
        return reconcile(self.policies, config)

    def configure(self, config: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """The reconciled config (what :meth:`PackClient.configure` sends); nothing is kept between checks."""
        return self.reconcile(config)

    def check(self, resources: Iterable[Resource], config: Mapping[str, Any] | None = None) -> Report:
        """What a preview reports: each resource policy on each resource, then each stack policy."""
        resources = list(resources)
        reconciled = self.reconcile(config)
        names = {r.urn_in(self.stack, self.project): r.name for r in resources}
        levels, configs = {}, {}
        for policy in self._policies:
            level = reconciled[policy.name]["level"]
            if level != "disabled":
                levels[policy.name] = "mandatory" if level == "remediate" else level
                # Configure carries the properties as a Struct too; an empty config reaches the policy as {}.
                configs[policy.name] = json_format.MessageToDict(to_struct(reconciled[policy.name]["props"])) or None
        active = [p for p in self._policies if p.name in levels]
        diags: list[Diagnostic] = []
        wires = [_wire(r.props) for r in resources]  # the Struct each request carries, built once
        for r, wire in zip(resources, wires, strict=True):  # Analyze, once per resource
            urn = r.urn_in(self.stack, self.project)
            for policy in active:
                if isinstance(policy, ResourceValidationPolicy):
                    rargs = ResourceValidationArgs(r.type, _props(wire), urn, r.name, _options(r), None, configs[policy.name])
                    diags += self._validate(policy, rargs, levels[policy.name], default_urn=urn, names=names)
        for policy in active:  # AnalyzeStack
            if isinstance(policy, StackValidationPolicy):
                sargs = StackValidationArgs(self._stack(resources, wires), configs[policy.name])
                diags += self._validate(policy, sargs, levels[policy.name], default_urn="", names=names)
        return Report(diags)

    def _stack(self, resources: list[Resource], wires: list[dict[str, Any]]) -> list[PolicyResource]:
        by_urn = {}
        out = []
        for r, wire in zip(resources, wires, strict=True):
            urn = r.urn_in(self.stack, self.project)
            pr = PolicyResource(r.type, _props(wire), urn, r.name, _options(r), None, None, [], {})
            by_urn[urn] = pr
            out.append((r, pr))
        for r, pr in out:
            if r.parent and r.parent in by_urn:
                pr.parent = by_urn[r.parent]
            pr.dependencies.extend(by_urn[d] for d in r.dependencies if d in by_urn)
            for k, urns in r.property_dependencies.items():
                pr.property_dependencies[k] = [by_urn[d] for d in urns if d in by_urn]
        return [pr for _, pr in out]

    def _validate(self, policy: Any, args: Any, level: str, *, default_urn: str, names: Mapping[str, str]) -> list[Diagnostic]:
        found: list[Diagnostic] = []

        def report(message: str, urn: str | None = None) -> None:
            u = urn or default_urn
            found.append(Diagnostic(policy=policy.name, level=level, message=message or policy.description, urn=u,
                                    resource=names.get(u)))

        try:
            _run(policy.validate, args, report)
        except UnknownValueError as err:
            found.append(Diagnostic(
                # The servicer sends no URN; the engine then attributes it as any other diagnostic.
                policy=policy.name, level="advisory", urn=default_urn, resource=names.get(default_urn),
                message=(f"can't run policy '{policy.name}' from policy pack '{self.pack_name}@v{PACK_VERSION}' "
                         f"during preview: {err.message}")))
        return found

    def __enter__(self) -> InProcessPack:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None
