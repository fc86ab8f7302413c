"""``bench tune --platform kubernetes``: the measured plan rendered as an HPA (or a KEDA ScaledObject),
its knobs tuned on simulated days with the same promise as the plan's (speech.sim.hpa_tune)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs
    from speech.sim.hpa_artifact import HpaPromise, HpaTuneArtifact
    from speech.sim.hpa_tune import HpaCandidate
    from speech.sim.instance import InstanceModel


def _promise(c: HpaCandidate) -> HpaPromise:
    import numpy as np

    from speech.sim.hpa_artifact import HpaPromise

    return HpaPromise(within_slo_share=round(float(np.mean([d.within_slo_share for d in c.days])), 6),
                      slo_share_low=round(c.worst_share, 6), slo_share_bound=round(c.share_bound.bound, 6),
                      instance_hours=round(c.hours, 3), cost_vs_floor=round(c.x_floor, 4), draws=len(c.days))


def run_kubernetes(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, inputs: PlanInputs, model: InstanceModel,
                   train: list[tuple[int, np.ndarray]], hold: list[tuple[int, np.ndarray]]) -> int:
    import numpy as np

    from bench.cli.parallel import process_map
    from bench.cli.progress import RunProgress, wanted
    from speech.files import write_artifact
    from speech.plan.realtime import build_plan
    from speech.schema.artifacts import canonical_sha256
    from speech.sim.hpa_artifact import HpaCheck, HpaKnob, HpaTuneArtifact, hpa_fields
    from speech.sim.hpa_tune import HPA_KNOBS, HpaTuner, describe
    from speech.sim.traces import parse_spec
    from speech.stack.read import file_sha256

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
    if args.json:
        print(json.dumps(art.model_dump(mode="json"), indent=2))
    else:
        print(render(art))
        print(f"\nwrote {path}")
    sys.stdout.flush()
    return 0 if art.held else 1


def render(a: HpaTuneArtifact) -> str:
    lines = [f"bench tune --platform kubernetes: {a.model} as {'an HPA' if a.autoscaler == 'hpa' else 'a KEDA ScaledObject'} "
             f"on {a.trace}, SLO share target {a.slo_share_target:.2%} ({a.evaluations} simulated days)", "",
             f"{'knob':<20} {'seed (the plan rendered)':<36} tuned"]
    lines += [f"{k.knob:<20} {k.seed:<36} {k.tuned}" for k in a.knobs]
    lines += ["", f"{'draws (' + str(a.promise.draws) + ')':<12} in SLO: mean  low      bound    inst-h  x floor"]
    for name, p in (("seed", a.seed_promise), ("tuned", a.promise)):
        lines.append(f"{name:<12} {p.within_slo_share:12.3%}  {p.slo_share_low:7.3%}  {p.slo_share_bound:7.3%}  "
                     f"{p.instance_hours:6.1f}  {p.cost_vs_floor:7.2f}")
    if a.checks:
        lines += ["", "checks                  seed in SLO  tuned in SLO  tuned inst-h  keeps"]
        lines += [f"{c.day:<23} {c.seed_within_slo_share:11.3%}  {c.tuned_within_slo_share:12.3%}  {c.tuned_instance_hours:12.1f}  "
                  f"{'yes' if c.tuned_keeps_share else 'NO'}" for c in a.checks]
    lines += ["", "promise held on every check" if a.held else "promise NOT held on every check (exit 1)"]
    return "\n".join(lines)
