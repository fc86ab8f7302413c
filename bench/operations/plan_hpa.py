"""``bench plan --stack NAME --hpa FILE``: the HPA ``bench tune --platform kubernetes`` found, stored
in the stack entry so ``python -m speech render`` and ``pulumi up`` deploy it: its target and
minReplicas as the plan inputs ``target_share`` and ``min_instances`` (the plan and the policy pack
see them), its scale-down behavior as ``kubernetes.scale_down`` with where it came from
(speech.deploy.kubernetes.tuned). Every check runs before anything is written."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from bench.errors import UsageError
from speech.deploy.kubernetes.tuned import differences, hpa_spec, rendered_fields, scale_down_block, tuned_target_share
from speech.errors import ConfigError, describe_validation_error
from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.schema.kubernetes import KubernetesConfig, ScaleDown, TunedFrom
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.hpa_artifact import HpaTuneArtifact
from speech.stack.read import file_sha256, is_reference, read_reference, stack_file
from speech.stack.write import existing_model_entry

REASON = "bench tune --platform kubernetes"


@dataclass(frozen=True)
class TunedHpa:
    """A tune artifact that belongs to the stack entry, and its scale-down as the stack stores it."""

    artifact: HpaTuneArtifact
    path: Path
    scale_down: ScaleDown


def load_tuned(args: argparse.Namespace, q: QmaxArtifact, old: dict | None) -> TunedHpa:
    """The artifact at ``args.hpa``, refused (:class:`UsageError`, exit 2) unless it was tuned for this
    entry: the same model, the entry's autoscaler, the same measurement files (sha256 of their bytes)."""

    path = Path(args.hpa)
    where = f"--hpa {path}"
    if not args.stack:
        raise UsageError(f"{where}: the tuned HPA goes into a stack entry; pass --stack NAME")
    art = load_artifact(path, HpaTuneArtifact)
    k8s = (old or {}).get("kubernetes")
    if not old or old.get("hosting") != "kubernetes" or not isinstance(k8s, dict):
        raise UsageError(f"{where}: stack {args.stack!r} has no hosting: kubernetes entry for {q.model}; add its kubernetes "
                         "block first (docs/kubernetes.md), then store the tuned HPA")
    if art.model != q.model:
        raise UsageError(f"{where}: tuned for model {art.model!r}, but --qmax measures {q.model!r}; pass the artifact "
                         f"bench tune --platform kubernetes wrote for {q.model}")
    autoscaler = k8s.get("autoscaler", "hpa")
    if art.autoscaler != autoscaler:
        raise UsageError(f"{where}: tuned a{' KEDA ScaledObject' if art.autoscaler == 'keda' else 'n HPA'}, but the stack "
                         f"entry's kubernetes.autoscaler is {autoscaler}; re-run bench tune --platform kubernetes "
                         f"--autoscaler {autoscaler}")
    for name, recorded, flag in (("qmax", art.qmax_sha256, args.qmax), ("ttotal", art.ttotal_sha256, args.ttotal)):
        actual = file_sha256(Path(flag).read_bytes())
        if recorded is None:
            raise UsageError(f"{where}: the artifact does not record which {name} file it was tuned on (written by an older "
                             "bench); re-run bench tune --platform kubernetes with these --qmax and --ttotal")
        if recorded != actual:
            raise UsageError(f"{where}: tuned on a {name} artifact of {recorded[:19]}..., but --{name} {flag} is "
                             f"{actual[:19]}...; re-run bench tune --platform kubernetes on the entry's measurements")
    if art.hpa.get("scheduledFloors"):
        raise UsageError(f"{where}: the tuned ScaledObject has scheduled floors, which this flag does not store; derive "
                         "them with --schedule-from TRACE, or tune without them")
    tuned_from = TunedFrom(path=path.as_posix(), sha256=file_sha256(path.read_bytes()), trace=art.trace,
                           slo_share_target=art.slo_share_target, slo_share_bound=art.promise.slo_share_bound,
                           held=art.held)
    try:
        block = scale_down_block(art.hpa, tuned_from)
    except ConfigError as err:
        raise UsageError(f"{where}: {err}") from None
    return TunedHpa(artifact=art, path=path, scale_down=block)


def tuned_inputs(args: argparse.Namespace, tuned: TunedHpa, inputs: PlanInputs, q: QmaxArtifact,
                 t: TtotalArtifact) -> PlanInputs:
    """``inputs`` with the tuned target share (of the plan's Q_max) and minReplicas, each with its
    reason; a flag that sets either to something else is refused."""

    if inputs.max_delay_s is not None:
        raise UsageError("--hpa: a batch route (--max-delay-s) has no HPA; drop one of them")
    target, min_replicas, _ = hpa_spec(tuned.artifact.hpa)
    q_max = build_plan(q, t, inputs, allow_config_mismatch=True).q_max  # floor(Q_max x derate): no input here moves it
    share = tuned_target_share(target, q_max)
    for flag, name, value in (("--target-share", "target_share", share), ("--min-instances", "min_instances", min_replicas)):
        given = getattr(args, name, None)
        if given is not None and abs(given - value) > 1e-9:
            raise UsageError(f"{flag} {given:g} and --hpa {tuned.path} ({name} {value:g}) disagree; drop one of them")
    why = f"{REASON} ({tuned.path.name}, {tuned.scale_down.tuned_from.sha256[:19] if tuned.scale_down.tuned_from else ''})"
    values = {**inputs.model_dump(), "target_share": share, "min_instances": min_replicas,
              "reasons": {**inputs.reasons, "target_share": why, "min_instances": why}}
    try:
        return PlanInputs.model_validate(values)
    except ValidationError as err:
        raise UsageError(f"--hpa {tuned.path}: {describe_validation_error(err, 'the tuned inputs')}") from None


def with_scale_down(old: dict, tuned: TunedHpa) -> dict:
    """The old entry (plain JSON values) with ``kubernetes.scale_down`` set to the tuned one."""
    k8s = {**old["kubernetes"], "scale_down": tuned.scale_down.model_dump(mode="json")}
    return {**old, "kubernetes": k8s}


def rendering_notes(plan: PlanArtifact, entry_k8s: object, tuned: TunedHpa) -> list[str]:
    """What the stored entry renders differently from the tuned HPA (the plan's cap at the tuned
    target, a floor the trough raises), one line each; [] when it renders the tuned spec."""

    assert isinstance(entry_k8s, KubernetesConfig)
    out = differences(rendered_fields(plan, entry_k8s), tuned.artifact.hpa)
    if plan.schedule is not None and not tuned.artifact.hpa.get("scheduledFloors"):
        out.append(f"plan.schedule's {len(plan.schedule.floors)} scheduled floors (cron triggers), which the tuned one was "
                   "simulated without")
    return out


def stored_line(plan: PlanArtifact, entry_k8s: object, tuned: TunedHpa) -> str:
    """What ``bench plan --hpa`` prints after storing: the artifact, its promise, the differences."""
    diff = rendering_notes(plan, entry_k8s, tuned)
    held = "promise held" if tuned.artifact.held else "promise NOT held on every check: see its table"
    return (f"stored the tuned HPA of {tuned.path} ({held}) in kubernetes.scale_down, plan.target_share and "
            "plan.min_instances" + (": render deploys it as tuned" if not diff
                                    else "; the rendering differs in: " + "; ".join(diff)))


def apply(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, inputs: PlanInputs,
          old: dict | None) -> tuple[PlanInputs, dict | None, TunedHpa | None]:
    """``bench plan``'s inputs and old entry with ``--hpa`` applied (unchanged without it)."""
    if getattr(args, "hpa", None) is None:
        return inputs, old, None
    tuned = load_tuned(args, q, old)
    assert old is not None  # load_tuned refuses a missing entry
    return tuned_inputs(args, tuned, inputs, q, t), with_scale_down(old, tuned), tuned


def from_stack_entry(args: argparse.Namespace) -> None:
    """``--stack NAME --hpa FILE`` without ``--qmax``, ``--ttotal`` and ``--peak-rps``: take them from the
    stack entry of the artifact's model (its measurement references, checked against their sha256s, and
    its stored peak), so storing a tuned HPA needs no other flag. Anything else is left as it is."""

    flags = (getattr(args, "qmax", None), getattr(args, "ttotal", None), getattr(args, "peak_rps", None))
    if getattr(args, "hpa", None) is None or not args.stack or any(v is not None for v in flags) \
            or getattr(args, "migrate_config", False):
        return
    art = load_artifact(args.hpa, HpaTuneArtifact)
    path = stack_file(args.stack_dir, args.stack)
    raw = existing_model_entry(path, art.model) if path.exists() else None
    old = json.loads(json.dumps(raw, default=str)) if raw is not None else None
    if not old:
        raise UsageError(f"--hpa {args.hpa}: {path} has no entry for {art.model}, the model it was tuned for; plan it first "
                         "with --qmax FILE --ttotal FILE --peak-rps N --stack NAME")
    measurements = old.get("measurements") or {}
    for name in ("qmax", "ttotal"):
        value = measurements.get(name)
        if not is_reference(value):
            raise UsageError(f"--hpa {args.hpa}: the entry's {name} is not a reference to a file (embedded, or missing); "
                             "pass --qmax FILE --ttotal FILE --peak-rps N, or run --migrate-config first")
        ref, _ = read_reference(value, path.parent, f"speech-endpoints:models.{art.model}.measurements.{name}")
        setattr(args, name, path.parent / ref.path)
    peak = (old.get("plan") or {}).get("peak_rps")
    if peak is None:
        raise UsageError(f"--hpa {args.hpa}: the entry for {art.model} has no plan.peak_rps; pass --peak-rps N")
    args.peak_rps = float(peak)
