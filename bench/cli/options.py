"""Options and argument helpers more than one command shares, so that no command imports another.

- :func:`add_target_arguments`, :func:`check_timing`: the target and timing flags of the
  load-generating commands (qmax, ttotal, replay, validate --live).
- :func:`plan_inputs`: the plan flags over a stack entry's stored inputs (plan, copies, simulate).
- :func:`serve_argv`: ``--serve-cmd`` as the argv of a local server on a port (ttotal, tcopy).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from speech.schema.artifacts import QmaxArtifact
    from speech.schema.config import PlanInputs

from bench.errors import UsageError
from speech.errors import describe_validation_error
from speech.schema import bounds as fields
from speech.schema.units import MAX_SURGE_RATIO


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """Flags every load-generating command shares."""
    g = p.add_argument_group("target (one of)")
    g.add_argument("--url", metavar="URL", help="local container, e.g. http://127.0.0.1:8080")
    g.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint name")
    p.add_argument("--transport", choices=["stream", "bidirectional"], default="stream",
                   help="stream = POST /invocations (InvokeEndpointWithResponseStream); bidirectional = the "
                        "WebSocket / InvokeEndpointWithBidirectionalStream (default stream)")
    p.add_argument("--model", default="kokoro-82m", metavar="NAME", help="model name in the artifact (default kokoro-82m)")
    p.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")
    p.add_argument("--receipt-bucket", metavar="BUCKET",
                   help="SageMaker runs: the model's provenance bucket (stack output "
                        "endpoints.<model>.provenance_bucket); a receipt of the artifact's sha256 is written there when the run ends, and "
                        "the preview requires it before measured figures may scale")
    p.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                   help="where the pre-freeze scaling state is saved (default ~/.cache/speech-endpoints)")


def check_timing(args: argparse.Namespace) -> None:
    if not args.slo_ms > 0:
        raise UsageError(f"--slo-ms {args.slo_ms:g}: must be > 0 (a p95 TTFAB objective in milliseconds)")
    if args.settle_s < 0:
        raise UsageError(f"--settle-s {args.settle_s:g}: must be >= 0")
    if not args.measure_s > 0:
        raise UsageError(f"--measure-s {args.measure_s:g}: must be > 0")


# --- plan inputs (bench plan, copies, simulate) ----------------------------------------------------

FLAG_OF = {
    "slo_ms": "--slo-ms",
    "surge_ratio": "--surge-ratio",
    "peak_rps": "--peak-rps",
    "trough_rps": "--trough-rps",
    "min_instances": "--min-instances",
    "qmax_derate": "--qmax-derate",
    "max_delay_s": "--max-delay-s",
    "slo_share": "--slo-share",
    "target_share": "--target-share",
    "scale_in_step_share": "--scale-in-step-share",
    "scale_in_window_s": "--scale-in-window-s",
    "scale_in_cooldown_s": "--scale-in-cooldown-s",
    "scale_out_cooldown_s": "--scale-out-cooldown-s",
}


TUNED = ("slo_share", "target_share", "scale_in_step_share", "scale_in_window_s", "scale_in_cooldown_s",
         "scale_out_cooldown_s")


FIX_OF = {
    # Each bound is the one PlanInputs' field is built from (speech.schema.bounds), not restated.
    "--slo-ms": "pass the p95 TTFAB objective in milliseconds, e.g. --slo-ms 3000",
    "--surge-ratio": f"choose {fields.SURGE_RATIO.text()}, e.g. --surge-ratio 1.25 (at {MAX_SURGE_RATIO:g} the "
                     "scale-in threshold reaches 0)",
    "--peak-rps": "pass the busiest-hour rate in requests per second, e.g. --peak-rps 500",
    "--trough-rps": f"pass the quietest-hour rate in requests per second ({fields.RATE_RPS.text()})",
    "--min-instances": f"real-time variants need at least {fields.MIN_INSTANCES.lo:g} instance",
    "--max-delay-s": "pass the acceptable completion delay of a batch request in seconds, e.g. --max-delay-s 900",
    "--qmax-derate": f"choose {fields.QMAX_DERATE.text()}, e.g. --qmax-derate 0.9 (what bench observe recommends when "
                     "the endpoint drifted)",
    "--slo-share": f"choose {fields.SLO_SHARE.text()}, e.g. --slo-share 0.995",
    "--target-share": f"choose {fields.TARGET_SHARE.text()}, at most 1 - h (2 - surge ratio)",
    "--scale-in-step-share": f"choose {fields.SCALE_IN_STEP_SHARE.text()}, at most 1 - C_scale_min / C_scale_max",
    "--scale-in-window-s": f"choose {fields.SCALE_IN_WINDOW_S.text('S')} seconds",
    "--scale-in-cooldown-s": f"choose {fields.SCALE_IN_COOLDOWN_S.text('S')} seconds (the plan then checks it against "
                             "the window and T_total)",
    "--scale-out-cooldown-s": f"choose {fields.SCALE_OUT_COOLDOWN_S.text('S')} seconds (the plan then checks it against "
                              "the metric period and T_total)",
}

DEFAULTS = {"surge_ratio": 1.25, "min_instances": 1, "qmax_derate": 1.0}
"""What a flag means when neither it nor the stack entry gives a value (PlanInputs' defaults)."""


def plan_inputs(args: argparse.Namespace, qmax: QmaxArtifact, stored: dict | None = None) -> PlanInputs:
    """The flags over the stack entry's stored inputs (``stored``) over the defaults.

    Every stored input a flag does not override is kept, fields bench has no flag for included
    (``reaction``, and what later versions add). ``max_delay_s`` is not carried over: it chooses
    the kind of plan, and a plan without ``--max-delay-s`` is a real-time one."""
    from pydantic import ValidationError

    from speech.schema.config import PlanInputs

    values = {k: v for k, v in (stored or {}).items() if k != "max_delay_s" and v is not None}
    given = {field: getattr(args, field, None) for field in FLAG_OF}
    values.update({k: v for k, v in given.items() if v is not None})
    values.setdefault("slo_ms", qmax.slo.ttfab_p95_ms)
    peak = values.get("peak_rps")
    values.setdefault("trough_rps", min(1.0, peak) if isinstance(peak, (int, float)) and peak > 0 else 1.0)
    for field, default in DEFAULTS.items():
        values.setdefault(field, default)
    try:
        values.update({k: getattr(args, k) for k in TUNED if getattr(args, k, None) is not None})
        reasons = _reasons(getattr(args, "reason", None) or [])
        if reasons:
            values["reasons"] = {**(values.get("reasons") or {}), **reasons}
        promise = _promise(getattr(args, "promise", None))
        if promise is not None:
            values["promise"] = promise
        return PlanInputs(**values)
    except ValidationError as err:
        loc = err.errors()[0]["loc"]
        # A field maps to its flag; a model-level check (trough vs peak) names both flags.
        flag = FLAG_OF.get(str(loc[0]), str(loc[0])) if loc else "--trough-rps/--peak-rps"
        fix = FIX_OF.get(flag, "see --help") if loc else "the trough cannot exceed the peak"
        kept = [f"{k} {v:g}" for k, v in values.items()
                if k in (stored or {}) and given.get(k) is None and isinstance(v, (int, float))]
        stored_hint = f" (kept from the stack entry: {', '.join(kept)}; a flag overrides it)" if kept and not loc else ""
        raise UsageError(f"{describe_validation_error(err, key=lambda _: flag)}{stored_hint}; {fix}") from None


def _reasons(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, why = item.partition("=")
        if not sep or name not in TUNED or not why.strip():
            raise UsageError(f"--reason {item!r}: use NAME=WHY with NAME one of {', '.join(TUNED)}")
        out[name] = why.strip()
    return out


PROMISE_FILES = "bench tune's tune-<model>-<trace>.json, the tuned plan it wrote, or a promise's JSON"


def _promise(path: Path | None):
    """``--promise FILE``'s promise: the plan part of a tune artifact's promise, a (tuned) plan's own,
    or a promise's JSON in either shape (the plan's or the tune artifact's)."""
    if path is None:
        return None
    import json

    from speech.errors import ArtifactError
    from speech.files import load_artifact
    from speech.schema.plan_artifacts import PlanArtifact
    from speech.schema.promise import Promise
    from speech.sim.artifact import TuneArtifact, TunePromise

    try:  # a peek at the shape only: load_artifact reads it again and says what is wrong with it
        peek = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        peek = None
    kind = peek.get("kind") if isinstance(peek, dict) else None
    try:
        if kind == "tune":
            return load_artifact(path, TuneArtifact).promise.plan_promise()
        if kind == "plan":
            promise = load_artifact(path, PlanArtifact).promise
            if promise is None:
                raise UsageError(f"--promise {path}: the plan holds no promise (an untuned plan); pass {PROMISE_FILES}")
            return promise
        if kind is not None:
            raise UsageError(f"--promise {path}: a {kind!r} artifact holds no plan promise; pass {PROMISE_FILES}")
        if isinstance(peek, dict) and "within_slo_share" in peek:
            return load_artifact(path, TunePromise).plan_promise()
        return load_artifact(path, Promise)
    except ArtifactError as err:
        raise UsageError(f"--promise {err}") from None


# --- local servers (bench ttotal, tcopy) ----------------------------------------------------------


def serve_argv(serve_cmd: str, port: int) -> list[str]:
    if "{port}" in serve_cmd:
        return shlex.split(serve_cmd.format(port=port))
    return shlex.split(serve_cmd) + ["--host", "127.0.0.1", "--port", str(port)]
