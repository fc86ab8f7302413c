"""Analyzer-protocol client: drive the real pack process the way the Pulumi engine does.

Start ``policy/__main__.py`` (it prints its gRPC port on stdout), ask GetAnalyzerInfo, send
Configure with the reconciled policy config (schema defaults, then ``all``, then per-policy
entries: the engine's ReconcilePolicyPackConfig), Analyze once per resource, then AnalyzeStack
with all of them. Properties travel as a google.protobuf.Struct; an unknown value is the
engine's unknown sentinel string (:data:`UNKNOWN`).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy.deserialize import serialize_properties

from policy.resources import UNKNOWN_STRING

UNKNOWN = UNKNOWN_STRING
"""What the engine sends for a value not known during preview."""
PACK_DIR = Path(__file__).resolve().parent
LEVEL_NAMES = {0: "advisory", 1: "mandatory", 2: "disabled", 3: "remediate"}
LEVEL_CODES = {v: k for k, v in LEVEL_NAMES.items()}


class PolicyConfigError(ValueError):
    """The policy config names an unknown policy or level, or has a value of the wrong type."""


@dataclass
class Resource:
    """A resource as the engine describes it to an analyzer."""

    type: str
    name: str
    props: Mapping[str, Any]
    parent: str | None = None
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    urn: str | None = None

    def urn_in(self, stack: str, project: str) -> str:
        return self.urn or f"urn:pulumi:{stack}::{project}::{self.type}::{self.name}"


@dataclass(frozen=True)
class Diagnostic:
    policy: str
    level: str
    message: str
    urn: str
    resource: str | None
    """Logical name of the resource the violation is about (None: the stack as a whole)."""


@dataclass
class Report:
    diagnostics: list[Diagnostic]

    def by_level(self, level: str) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.level == level]

    @property
    def mandatory(self) -> list[Diagnostic]:
        return self.by_level("mandatory")

    @property
    def advisory(self) -> list[Diagnostic]:
        return self.by_level("advisory")

    def of(self, policy: str) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.policy == policy]


def to_struct(props: Mapping[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(dict(serialize_properties(props)))
    return s


class PackClient:
    """One running pack process and a gRPC channel to it. Use as a context manager."""

    def __init__(self, pack_dir: Path = PACK_DIR, *, stack: str = "dev", project: str = "speech-endpoints",
                 python: str = sys.executable, start_timeout_s: float = 60.0) -> None:
        self.stack, self.project = stack, project
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([python, "-u", str(pack_dir / "__main__.py")], cwd=pack_dir,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        port = self._read_port(start_timeout_s)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(self.channel).result(timeout=start_timeout_s)
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)
        self._info = self.stub.GetAnalyzerInfo(empty_pb2.Empty())

    def _read_port(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        line = b""
        # selectors (epoll/poll), not select.select: a long test session may hold descriptors past 1024.
        sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None  # Popen(stdout=PIPE)
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            return self._read_port_from(sel, deadline, line)
        finally:
            sel.close()

    def _read_port_from(self, sel: selectors.BaseSelector, deadline: float, line: bytes) -> int:
        assert self.proc.stdout is not None and self.proc.stderr is not None  # Popen(stdout=PIPE, stderr=PIPE)
        while not line.endswith(b"\n"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
                self.close()
                raise RuntimeError(f"policy pack did not print its port: {err.strip()[-2000:]}")
            if sel.select(timeout=0.2):
                line += os.read(self.proc.stdout.fileno(), 64)
        return int(line.strip().splitlines()[0])

    # --- protocol -------------------------------------------------------------------------

    @property
    def policies(self) -> dict[str, dict[str, Any]]:
        """name -> {level, defaults} from GetAnalyzerInfo."""
        out = {}
        for p in self._info.policies:
            schema = json_format.MessageToDict(p.configSchema.properties) if p.HasField("configSchema") else {}
            out[p.name] = policy_info(LEVEL_NAMES[p.enforcementLevel], schema)
        return out

    def reconcile(self, config: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
        """Schema defaults, then ``all``, then per-policy entries, validated (engine semantics)."""
        return reconcile(self.policies, config)

    def configure(self, config: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        reconciled = self.reconcile(config)
        req = analyzer_pb2.ConfigureAnalyzerRequest()
        for name, r in reconciled.items():
            pc = req.policyConfig[name]
            pc.enforcementLevel = LEVEL_CODES[r["level"]]
            pc.properties.update(r["props"])
        self.stub.Configure(req)
        return reconciled

    def analyze(self, resource: Resource) -> list[Diagnostic]:
        urn = resource.urn_in(self.stack, self.project)
        req = analyzer_pb2.AnalyzeRequest(type=resource.type, properties=to_struct(resource.props), urn=urn,
                                          name=resource.name,
                                          options=analyzer_pb2.AnalyzerResourceOptions(parent=resource.parent or ""))
        resp = self.stub.Analyze(req)
        return [self._diag(d, default_urn=urn, names={urn: resource.name}) for d in resp.diagnostics]

    def analyze_stack(self, resources: Iterable[Resource]) -> list[Diagnostic]:
        resources = list(resources)
        req = analyzer_pb2.AnalyzeStackRequest()
        names = {}
        for r in resources:
            urn = r.urn_in(self.stack, self.project)
            names[urn] = r.name
            ar = req.resources.add(type=r.type, urn=urn, name=r.name, parent=r.parent or "")
            ar.properties.CopyFrom(to_struct(r.props))
            ar.dependencies.extend(r.dependencies)
            for k, urns in r.property_dependencies.items():
                ar.propertyDependencies[k].urns.extend(urns)
        resp = self.stub.AnalyzeStack(req)
        return [self._diag(d, default_urn="", names=names) for d in resp.diagnostics]

    def check(self, resources: Iterable[Resource], config: Mapping[str, Any] | None = None) -> Report:
        """What the engine does in a preview: Configure, Analyze each resource, AnalyzeStack."""
        resources = list(resources)
        self.configure(config)
        diags: list[Diagnostic] = []
        for r in resources:
            diags += self.analyze(r)
        diags += self.analyze_stack(resources)
        return Report(diags)

    def _diag(self, d: Any, *, default_urn: str, names: Mapping[str, str]) -> Diagnostic:
        urn = d.urn or default_urn
        # pulumi_policy prefixes the policy description; the rule's own message is what follows.
        message = d.message.split("\n", 1)[1] if "\n" in d.message else d.message
        return Diagnostic(policy=d.policyName, level=LEVEL_NAMES.get(d.enforcementLevel, str(d.enforcementLevel)),
                          message=message, urn=urn, resource=names.get(urn))

    def close(self) -> None:
        ch = getattr(self, "channel", None)
        if ch is not None:
            ch.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for s in (self.proc.stdout, self.proc.stderr):
            if s:
                s.close()

    def __enter__(self) -> PackClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def policy_info(level: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """One policy as :func:`reconcile` reads it: its level, config schema and the schema's defaults."""
    return {"level": level, "schema": dict(schema),
            "defaults": {k: v["default"] for k, v in schema.items() if isinstance(v, dict) and "default" in v}}


def reconcile(policies: Mapping[str, Mapping[str, Any]], config: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The engine's ReconcilePolicyPackConfig: schema defaults, then ``all``, then per-policy entries,
    validated against each policy's schema. ``policies``: name -> {level, schema, defaults}."""
    result = {n: {"level": p["level"], "props": dict(p["defaults"])} for n, p in policies.items()}
    config = dict(config or {})
    for key, _given in config.items():
        if key != "all" and key not in policies:
            raise PolicyConfigError(f"policy config names {key!r}, which is not in this pack; policies: {', '.join(sorted(policies))}")
    if "all" in config:
        level = config["all"] if isinstance(config["all"], str) else (config["all"] or {}).get("enforcementLevel")
        for r in result.values():
            r["level"] = _level(level, "all")
    for key, given in config.items():
        if key == "all":
            continue
        if isinstance(given, str):
            result[key]["level"] = _level(given, key)
            continue
        if not isinstance(given, Mapping):
            raise PolicyConfigError(f"policy config {key!r} must be a level string or an object, got {given!r}")
        for k, v in given.items():
            if k == "enforcementLevel":
                result[key]["level"] = _level(v, key)
                continue
            schema = policies[key]["schema"].get(k)
            if schema is None:
                known = ", ".join(sorted(policies[key]["schema"])) or "none"
                raise PolicyConfigError(f"policy config {key}.{k} is not a property of {key} (properties: {known})")
            _check_type(f"{key}.{k}", v, schema)
            result[key]["props"][k] = v
    return result


def _level(value: Any, where: str) -> str:
    if value not in LEVEL_CODES:
        raise PolicyConfigError(f"policy config {where!r}: enforcement level {value!r} is not one of {', '.join(LEVEL_CODES)}")
    return value


_JSON_TYPES = {"boolean": (bool,), "number": (int, float), "integer": (int,), "string": (str,), "array": (list,), "object": (dict,)}


def _check_type(where: str, value: Any, schema: Mapping[str, Any]) -> None:
    want: Any = schema.get("type")
    types = _JSON_TYPES.get(want)
    if types is None:
        return
    ok = isinstance(value, types) and not (want in ("number", "integer") and isinstance(value, bool))
    if not ok:
        raise PolicyConfigError(f"policy config {where} must be a {want}, got {json.dumps(value)}")
