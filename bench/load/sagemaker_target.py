"""A SageMaker endpoint as a ladder's target: InvokeEndpointWithResponseStream (or the bidirectional
stream) through boto3, one blocking call per request on a thread pool, TTFAB from just before the
call to the first audio byte (the interface: :class:`bench.load.targets.Target`)."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.aws import client as aws
from bench.errors import TargetError, UsageError
from bench.load.outcome import REJECT_CODES, Outcome
from bench.load.request import error_code, payload
from speech.schema.artifacts import Fingerprint


class SageMakerTarget:
    """A SageMaker endpoint through boto3 InvokeEndpointWithResponseStream (blocking calls run on
    a thread pool sized to the concurrency, so the event loop only keeps time)."""

    def __init__(self, endpoint: str, session: Any = None, transport: str = "stream", variant: str = aws.VARIANT,
                 inference_component: str | None = None) -> None:

        self.endpoint = endpoint
        self.variant = variant
        self.inference_component = inference_component
        """Invocations name this component (InferenceComponentName): the requests reach its copies only."""
        self.component: dict = {}
        self.name = f"sagemaker:{endpoint}"
        self.transport = transport
        self.session = session or aws.session()
        self._runtime: Any = None  # boto3's sagemaker-runtime client, made in open()
        self._pool: ThreadPoolExecutor | None = None
        self._workers = 0
        self.described: dict = {}

    def check(self) -> None:
        ep = aws.describe_endpoint(self.session, self.endpoint)
        if ep.get("EndpointStatus") not in ("InService", "Updating"):
            raise TargetError(f"endpoint {self.endpoint!r} is {ep.get('EndpointStatus')}, not InService; wait for it")
        self.described = ep
        if self.inference_component:
            self.check_component()
        if self.transport == "bidirectional":
            client = self.session.client("sagemaker-runtime")
            if not hasattr(client, "invoke_endpoint_with_bidirectional_stream"):
                raise TargetError(
                    "--transport bidirectional on SageMaker needs InvokeEndpointWithBidirectionalStream, which this "
                    f"boto3 ({_boto3_version()}) does not provide (it needs the HTTP/2 SageMaker runtime SDK); "
                    "measure with --transport stream, or against the container locally with --url"
                )

    def check_component(self) -> dict:
        """The component must be on this endpoint, InService, with exactly one copy (current and
        desired): a ladder against more copies measures their sum, not one copy."""
        name = self.inference_component
        assert name is not None  # checked only for a component target (check)
        ic = aws.describe_inference_component(self.session, name)
        if ic.get("EndpointName") != self.endpoint:
            raise UsageError(f"--inference-component {name!r} is hosted on endpoint {ic.get('EndpointName')!r}, not "
                             f"{self.endpoint!r}; pass its endpoint with --endpoint")
        status = ic.get("InferenceComponentStatus")
        if status != "InService":
            raise TargetError(f"inference component {name!r} is {status}, not InService; wait for it"
                              + (f" ({ic['FailureReason']})" if ic.get("FailureReason") else ""))
        current, desired = aws.copy_counts(ic)
        if current != 1 or desired != 1:
            raise TargetError(
                f"inference component {name!r} runs {current} copies (desired {desired}); Q_max per copy needs exactly one: "
                f"set its copy count to 1 (UpdateInferenceComponentRuntimeConfig CopyCount=1, with its copy scaling "
                f"pinned to min = max = 1) and re-run"
            )
        self.component = ic
        return ic

    def fingerprint(self, instance_type: str | None = None, image_digest: str | None = None) -> Fingerprint:
        if instance_type and image_digest:
            fp_type, fp_digest = instance_type, image_digest
        elif self.inference_component:
            ic = self.component or aws.describe_inference_component(self.session, self.inference_component)
            got_type, got_digest = aws.component_identity(self.session, ic, self.described or None, self.variant)
            fp_type, fp_digest = got_type or "", got_digest or ""
            if not (instance_type or fp_type) or not (image_digest or fp_digest):
                raise TargetError(
                    f"inference component {self.inference_component!r}: cannot tell its instance type and image digest "
                    f"(got {fp_type!r}, {fp_digest or 'no digest'}); pass --instance-type and --image-digest"
                )
        else:
            ident = aws.endpoint_identity(self.session, self.endpoint, self.described or None)
            fp_type, fp_digest = ident.instance_type or "", ident.digest or ""
            if not (instance_type or fp_type) or not (image_digest or fp_digest):
                raise TargetError(
                    f"endpoint {self.endpoint!r}: cannot tell its instance type and image digest (got {fp_type!r}, "
                    f"{fp_digest or 'no digest'}); pass --instance-type and --image-digest"
                )
        try:
            return Fingerprint.of(instance_type or fp_type, image_digest or fp_digest)
        except ValueError as err:
            raise UsageError(f"fingerprint of {self.endpoint}: {str(err).splitlines()[0]}") from None

    async def open(self, concurrency: int) -> None:
        from botocore.config import Config

        # A ladder opens the target once per level: a pool sized for an earlier, lower level would
        # cap this one's requests in flight at that level's (and queue the rest unseen).
        workers = max(4, concurrency + 2)
        if self._pool is None or self._workers < workers:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="invoke")
            self._workers = workers
            cfg = Config(max_pool_connections=max(10, workers), read_timeout=70, retries={"max_attempts": 0})
            self._runtime = self.session.client("sagemaker-runtime", config=cfg)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _invoke_blocking(self, text: str) -> Outcome:
        from botocore.exceptions import ClientError

        start = time.perf_counter()
        out = Outcome(start=start, end=start)
        try:
            component = {"InferenceComponentName": self.inference_component} if self.inference_component else {}
            resp = self._runtime.invoke_endpoint_with_response_stream(
                EndpointName=self.endpoint, Body=json.dumps(payload(text)).encode(), ContentType="application/json",
                Accept="audio/pcm", **component,
            )
            for event in resp["Body"]:
                part = event.get("PayloadPart", {}).get("Bytes")
                if part:
                    if out.ttfab_s is None:
                        out.first_at_mono = time.monotonic()
                        out.ttfab_s = time.perf_counter() - start
                        out.first_chunk = part[:16]
                    out.nbytes += len(part)
                elif "ModelStreamError" in event:
                    out.error = str(event["ModelStreamError"].get("ErrorCode", "model_stream_error"))
            out.ok = out.ttfab_s is not None and out.error is None
            if out.ttfab_s is None and out.error is None:
                out.error = "empty_stream"
        except ClientError as err:
            body = err.response.get("OriginalMessage") or err.response.get("Error", {}).get("Message", "")
            code = error_code(body.encode() if isinstance(body, str) else b"")
            out.rejected = code in REJECT_CODES
            out.error = code or err.response.get("Error", {}).get("Code", "client_error")
        except Exception as err:  # noqa: BLE001 - one failed request must never end the ladder
            out.error = err.__class__.__name__
        out.end = time.perf_counter()
        return out

    async def invoke(self, text: str) -> Outcome:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._invoke_blocking, text)


def _boto3_version() -> str:
    import boto3

    return boto3.__version__
