"""Pulumi's mocks answering like AWS (ARNs, names, URLs, the S3 data sources) and like the engine
(a first preview's unknowns, alias URNs), for :func:`speech.infra.preview.run_preview`; and the
receipts an offline preview may read (:func:`load_receipts`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from speech.errors import ConfigError
from speech.stack.names import PROJECT

ACCOUNT_ID = "123456789012"
DEFAULT_REGION = "us-east-1"


def _physical(args_name: str) -> str:
    return args_name.lower()[:60]


def autoname_key(type_: str) -> str | None:
    """The input pulumi-aws fills with ``<logical name>-<random>`` when the program leaves it out
    (it does so in Check, so the name is known in a preview): ``bucket`` for buckets, else ``name``
    where the resource's Args class has one."""
    import importlib
    import inspect

    if type_ in ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"):
        return "bucket"
    pkg, _, rest = type_.partition(":")
    mod, _, cls = rest.partition(":")
    if pkg != "aws" or "/" not in mod or mod.startswith("index/"):
        return None
    module = mod.split("/")[0]
    try:
        m = importlib.import_module(f"pulumi_aws.{module}") if module != "lambda" else importlib.import_module("pulumi_aws.lambda_")
        args_cls = getattr(m, f"{cls}Args")
    except (ImportError, AttributeError):
        return None
    return "name" if "name" in inspect.signature(args_cls.__init__).parameters else None


def load_receipts(source: str | Path) -> dict[str, str]:
    """The receipts an offline preview may read, by S3 key (``receipts/<model>/<kind>-<sha>.json``).

    ``source``: ``s3://BUCKET`` reads that bucket's ``receipts/`` with boto3 (the environment's
    credentials; the only AWS call of an offline preview); otherwise a directory holding a copy of
    it, made with ``aws s3 sync s3://BUCKET/receipts/ DIR/receipts/``. Every data-source read of a
    receipt under the mocks is answered from here, whatever bucket the program names."""
    from speech.schema.receipts import RECEIPT_PREFIX

    text = str(source)
    if text.startswith("s3://"):
        bucket = text.removeprefix("s3://").strip("/")
        try:
            import boto3
            from botocore.exceptions import BotoCoreError, ClientError

            s3 = boto3.client("s3")
            out = {}
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{RECEIPT_PREFIX}/"):
                for obj in page.get("Contents", []):
                    out[obj["Key"]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode("utf-8", "replace")
            return out
        except (BotoCoreError, ClientError) as err:
            raise ConfigError(f"--receipts {text}: cannot read the receipts ({err}); check the bucket name and your "
                              "AWS credentials (s3:ListBucket, s3:GetObject), or pass a directory copy") from None
    root = Path(source)
    if not root.is_dir():
        raise ConfigError(f"--receipts {text}: no such directory; copy the receipts with "
                          f"`aws s3 sync s3://<bucket>/{RECEIPT_PREFIX}/ {text}/{RECEIPT_PREFIX}/`, or pass s3://<bucket>")
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted((root / RECEIPT_PREFIX).rglob("*.json")) if p.is_file()}


class SpeechMocks:
    """Pulumi mocks that record each registration and answer like AWS would (ARNs, names, URLs).

    ``first_preview``: answer like the engine does in the first preview of a new stack instead:
    a create returns its inputs, pulumi-aws's autonames, and nothing else, so every
    provider-computed output (ids, ARNs, URLs, digests, invocation results) is unknown.

    ``receipts``: the objects the S3 data sources find (by key, in any bucket); none by default,
    so a measured artifact's receipt is missing offline unless they are given.
    """

    def __init__(self, region: str = DEFAULT_REGION, account_id: str = ACCOUNT_ID, first_preview: bool = False,
                 receipts: dict[str, str] | None = None, bucket_errors: dict[str, str] | None = None) -> None:
        self.region = region
        self.account_id = account_id
        self.first_preview = first_preview
        self.receipts = dict(receipts or {})
        self.bucket_errors = dict(bucket_errors or {})
        """Bucket -> the error the S3 data sources fail with there (no such bucket, another
        account's, another region's), as the provider reports it."""
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        """Every data-source call the program made: (token, arguments)."""
        self.autonames: dict[tuple[str, str], dict[str, str]] = {}
        self.registered: dict[tuple[str, str], dict[str, Any]] = {}
        self.order: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    # pulumi.runtime.Mocks is an ABC; subclassing it lazily keeps this module importable without pulumi.
    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        with self._lock:
            self.registered[(args.typ, args.name)] = dict(args.inputs)
            self.order.append((args.typ, args.name))
        state = dict(args.inputs)
        if not args.custom:
            return "", state
        if self.first_preview:
            key = autoname_key(args.typ)
            if key and state.get(key) is None:
                suffix = hashlib.sha256(f"{args.typ}::{args.name}".encode()).hexdigest()[:7]
                state[key] = f"{args.name}-{suffix}"
                self.autonames[(args.typ, args.name)] = {key: state[key]}
            return "", {k: v for k, v in state.items() if v is not None}
        phys = state.get("name") or _physical(args.name)
        svc = args.typ.split(":")[1].split("/")[0]
        r, a = self.region, self.account_id
        if args.typ == "aws:s3/bucket:Bucket":
            state.setdefault("bucket", phys)
            state["arn"] = f"arn:aws:s3:::{state['bucket']}"
            return state["bucket"], state
        if args.typ == "aws:ecr/repository:Repository":
            state.setdefault("name", phys)
            state["arn"] = f"arn:aws:ecr:{r}:{a}:repository/{state['name']}"
            state["repositoryUrl"] = f"{a}.dkr.ecr.{r}.amazonaws.com/{state['name']}"
            state["registryId"] = a
            return state["name"], state
        if args.typ == "docker-build:index:Image":
            digest = "sha256:" + hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()
            state["digest"] = digest
            state["ref"] = f"{(state.get('tags') or ['image'])[0]}@{digest}"
            return f"{args.name}-id", state
        if args.typ == "aws:lambda/invocation:Invocation":
            state["result"] = json.dumps({"status": "SUCCEEDED"})
            return f"{args.name}-id", state
        if args.typ == "aws-native:sagemaker:InferenceComponent":
            # Cloud Control's outputs: the ARN and status (the name is an input the program sets).
            ic = state.get("inferenceComponentName") or _physical(args.name)
            state["inferenceComponentArn"] = f"arn:aws:sagemaker:{r}:{a}:inference-component/{ic}"
            state["inferenceComponentStatus"] = "InService"
            return state["inferenceComponentArn"], state
        if args.typ == "aws:cloudwatch/dashboard:Dashboard":
            state["dashboardArn"] = f"arn:aws:cloudwatch::{a}:dashboard/{state.get('dashboardName')}"
            return str(state.get("dashboardName")), state
        state.setdefault("name", phys)
        kind = args.typ.split(":")[-1].lower()
        state.setdefault("arn", f"arn:aws:{svc}:{'' if svc == 'iam' else r}:{a}:{kind}/{state['name']}")
        return f"{args.name}-id", state

    def call(self, args: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        with self._lock:
            self.invokes.append((args.token, dict(args.args)))
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": self.account_id, "arn": f"arn:aws:iam::{self.account_id}:user/preview",
                    "userId": "PREVIEW", "id": self.account_id}, []
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            registry = f"{self.account_id}.dkr.ecr.{self.region}.amazonaws.com"
            return {"authorizationToken": "UFJFVklFVzpQUkVWSUVX", "userName": "AWS", "password": "PREVIEW",
                    "proxyEndpoint": f"https://{registry}", "expiresAt": "2099-01-01T00:00:00Z", "id": self.region,
                    "registryId": self.account_id}, []
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region,
                    "endpoint": f"ec2.{self.region}.amazonaws.com", "description": self.region}, []
        if args.token in ("aws:s3/getObjects:getObjects", "aws:s3/getObject:getObject") and \
                args.args.get("bucket") in self.bucket_errors:
            return {}, [("bucket", self.bucket_errors[args.args["bucket"]])]
        if args.token == "aws:s3/getObjects:getObjects":
            bucket, prefix = args.args.get("bucket"), args.args.get("prefix") or ""
            return {"bucket": bucket, "id": bucket, "keys": sorted(k for k in self.receipts if k.startswith(prefix)),
                    "commonPrefixes": [], "owners": [], "requestCharged": ""}, []
        if args.token == "aws:s3/getObject:getObject":
            bucket, key = args.args.get("bucket"), args.args.get("key")
            if key not in self.receipts:
                # What the provider does for a missing key: the invoke fails.
                return {}, [("key", f"reading S3 Object (s3://{bucket}/{key}): couldn't find resource")]
            body = self.receipts[key]
            return {"bucket": bucket, "key": key, "id": key, "body": body, "contentType": "application/json",
                    "contentLength": len(body.encode()), "arn": f"arn:aws:s3:::{bucket}/{key}"}, []
        return {}, []


def make_mocks(region: str = DEFAULT_REGION, first_preview: bool = False, receipts: dict[str, str] | None = None,
               bucket_errors: dict[str, str] | None = None) -> Any:
    import pulumi

    class _Mocks(SpeechMocks, pulumi.runtime.Mocks):
        pass

    return _Mocks(region=region, first_preview=first_preview, receipts=receipts, bucket_errors=bucket_errors)


def _make_monitor(mocks: Any) -> Any:
    from pulumi.runtime.mocks import MockMonitor

    class _Monitor(MockMonitor):
        """Also records each registration's parent URN and its own URN (mocks do not see them)."""

        def __init__(self, m: Any) -> None:
            super().__init__(m)
            self.parents: dict[tuple[str, str], tuple[str, str, bool]] = {}
            self.requests: dict[tuple[str, str], dict[str, Any]] = {}
            self.root_urn = ""

        def alias_urns(self, request: Any) -> list[str]:
            """The URNs of a registration's aliases, by the rule of this monitor's URNs (make_urn): an
            alias spec's name, type and parent default to the resource's own; ``noParent`` is the root
            stack, the parent of every resource registered without one."""
            urns = []
            for alias in request.aliases:
                if alias.urn:
                    urns.append(alias.urn)
                    continue
                spec = alias.spec
                parent = self.root_urn if spec.noParent else (spec.parentUrn or request.parent)
                urns.append(self.make_urn(parent, spec.type or request.type, spec.name or request.name))
            return urns

        def RegisterResource(self, request: Any) -> Any:
            from google.protobuf import json_format

            resp = super().RegisterResource(request)
            if request.type == "pulumi:pulumi:Stack":
                self.root_urn = resp.urn
            key = (request.type, request.name)
            self.parents[key] = (request.parent, resp.urn, bool(request.custom))
            self.requests[key] = {
                # The inputs as sent, unknowns still the engine's sentinel string.
                "wire_inputs": json_format.MessageToDict(request.object),
                "dependencies": list(request.dependencies),
                "property_dependencies": {k: list(v.urns) for k, v in request.propertyDependencies.items()},
                "delete_before_replace": bool(request.deleteBeforeReplace),
                "replace_on_changes": list(request.replaceOnChanges),
                "aliases": self.alias_urns(request),
                "alias_specs": [{"urn": a.urn} if a.urn else
                                {"name": a.spec.name, "type": a.spec.type, "parent": a.spec.parentUrn,
                                 "no_parent": bool(a.spec.noParent)} for a in request.aliases],
                "ignore_changes": list(request.ignoreChanges),
            }
            return resp

        def Invoke(self, request: Any) -> Any:
            # The engine declines an invoke whose dependencies are pending creation (all of them, in
            # a first preview) and answers unknown.
            if getattr(self.mocks, "first_preview", False) and list(request.dependsOn):
                from pulumi.runtime.proto import resource_pb2

                return resource_pb2.ResourceInvokeResponse(unknown=True)
            return super().Invoke(request)

    return _Monitor(mocks)


def install_mocks(stack: str, config: dict[str, str], region: str = DEFAULT_REGION, project: str = PROJECT,
                  logger: logging.Logger | None = None, first_preview: bool = False,
                  receipts: dict[str, str] | None = None, bucket_errors: dict[str, str] | None = None) -> tuple[Any, Any]:
    """Reset Pulumi's runtime and install fresh mocks + config; returns (mocks, monitor).

    ``first_preview``: run as the engine runs the first preview of a new stack (dry run, nothing
    exists yet, provider-computed outputs unknown)."""
    import pulumi
    from pulumi.runtime import settings

    # Pulumi's runtime asks for the current event loop; a process that already ran asyncio.run()
    # (bench, a test) has none set, so give it a fresh one.
    # The previous preview's loop is finished: close it, or every run leaks its selector and self-pipe.
    with contextlib.suppress(RuntimeError):
        previous = asyncio.get_event_loop_policy().get_event_loop()
        if not previous.is_running() and not previous.is_closed():
            previous.close()
    asyncio.set_event_loop(asyncio.new_event_loop())
    settings.ROOT.set(None)  # set_mocks only makes a new root stack when none exists
    pulumi.runtime.set_all_config(dict(config), [])
    mocks = make_mocks(region, first_preview=first_preview, receipts=receipts, bucket_errors=bucket_errors)
    monitor = _make_monitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=first_preview, logger=logger, monitor=monitor)
    return mocks, monitor
