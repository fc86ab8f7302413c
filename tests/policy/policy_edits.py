"""Edits a user could make to a stack, applied to the resources the engine would send."""

from __future__ import annotations

from typing import Any

from policy.harness import Resource


def named(resources: list[Resource], name: str) -> Resource:
    for r in resources:
        if r.name == name:
            return r
    raise KeyError(name)


def set_path(resource: Resource, path: str, value: Any) -> None:
    cur: Any = resource.props
    parts = path.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    last = parts[-1]
    if isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value


def messages(report, policy: str, level: str | None = None) -> list[str]:
    return [d.message for d in report.of(policy) if level is None or d.level == level]
