"""``bench tune --platform kubernetes``'s protocol: the measured plan rendered as an HPA (or a KEDA
ScaledObject), its knobs tuned on simulated days with the same promise as the plan's
(speech.sim.hpa_tune), checked on the held-out draws and written; the command renders it."""

from __future__ import annotations

import argparse
import hashlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.cli.parallel import process_map
from bench.cli.progress import RunProgress, wanted
from speech.files import write_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import PlanInputs
from speech.sim.hpa_artifact import HpaCheck, HpaKnob, HpaPromise, HpaTuneArtifact, hpa_fields
from speech.sim.hpa_tune import HPA_KNOBS, HpaCandidate, HpaTuner, describe
from speech.sim.instance import InstanceModel
from speech.sim.traces import parse_spec
from speech.stack.read import file_sha256


def _promise(c: HpaCandidate) -> HpaPromise:
    return HpaPromise(within_slo_share=round(float(np.mean([d.within_slo_share for d in c.days])), 6),
                      slo_share_low=round(c.worst_share, 6), slo_share_bound=round(c.share_bound.bound, 6),
                      instance_hours=round(c.hours, 3), cost_vs_floor=round(c.x_floor, 4), draws=len(c.days))


def tune_kubernetes(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, inputs: PlanInputs, model: InstanceModel,
                    train: list[tuple[int, np.ndarray]], hold: list[tuple[int, np.ndarray]]) -> tuple[HpaTuneArtifact, Path]:
    """The HPA (or ScaledObject) tuned on the ``train`` draws, checked on ``hold``, written into
    ``args.out`` as ``<autoscaler>-<model>-<trace>.json``; the artifact and its path."""
    plan = build_plan(q, t, inputs, allow_config_mismatch=True)
    lengths = {a.size for _, a in train}
    rate = np.mean(np.stack([a for _, a in train]), axis=0) if len(lengths) == 1 else None
    progress = RunProgress("tune", total=None, enabled=wanted(args), unit="simulated days", every_s=5.0)
    with process_map(args.jobs) as (pmap, _width):
        tuner = HpaTuner(plan, model, args.slo_share, kind=args.autoscaler, schedule_rate=rate, map_fn=pmap,
                         on_eval=lambda: progress.advance(1))
        options = tuner.choices(tuner.seed_knobs())
        progress.set_total(len(train) * (1 + 2 * sum(len(v) - 1 for v in options.values())) + 2 * len(hold))
        try:
            seed, best = tuner.search(train)
            checks = []
            for j, day in enumerate(hold):
                s_c, b_c = tuner.candidate(seed.knobs, [day]), tuner.candidate(best.knobs, [day])
                checks.append(HpaCheck(day=f"held-out seed {args.seed + args.draws + j}",
                                       seed_within_slo_share=round(s_c.worst_share, 6),
                                       tuned_within_slo_share=round(b_c.worst_share, 6),
                                       tuned_instance_hours=round(b_c.hours, 3),
                                       tuned_keeps_share=b_c.worst_share >= args.slo_share))
        finally:
            progress.close()
    sd = describe(tuner.spec_for(seed.knobs), seed.knobs, q.q_max)
    bd = describe(tuner.spec_for(best.knobs), best.knobs, q.q_max)
    digest = hashlib.sha256(b"".join(np.asarray(a, dtype=np.float64).tobytes() for _, a in train)).hexdigest()
    art = HpaTuneArtifact(
        model=q.model, autoscaler=args.autoscaler, trace=args.trace, trace_sha256="sha256:" + digest, seed=args.seed,
        slo_share_target=args.slo_share, plan_sha256=canonical_sha256(plan),
        qmax_sha256=file_sha256(args.qmax.read_bytes()), ttotal_sha256=file_sha256(args.ttotal.read_bytes()),
        knobs=[HpaKnob(knob=k, seed=sd[k], tuned=bd[k]) for k in HPA_KNOBS],
        seed_promise=_promise(seed), promise=_promise(best), checks=checks,
        held=best.share_bound.bound >= args.slo_share and all(c.tuned_keeps_share for c in checks),
        evaluations=tuner.evaluations, hpa=hpa_fields(tuner.spec_for(best.knobs)), created_at=datetime.now(UTC))
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in parse_spec(args.trace)[0])
    path = write_artifact(args.out / f"{args.autoscaler}-{q.model}-{safe}.json", art)
    return art, path
