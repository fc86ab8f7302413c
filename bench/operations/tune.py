"""``bench tune``'s protocol, the one function the command calls (:func:`tune`): the draws of the
traffic, the plan inputs they imply, the search for the fewest instance-hours that keep the SLO
share (speech.sim.tune, docs/design.md §10.10), the checks of the winner (held-out draws, spikes
raised by the surge ratio, an hour's shift), the tuned plan and the tune artifact, written
atomically. Prints nothing (the progress display on stderr aside): the command renders."""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.cli.bounds import RANGES
from bench.cli.parallel import process_map
from bench.cli.progress import RunProgress, wanted
from bench.errors import UsageError
from bench.load.traces import load_history, load_trace
from bench.operations.tune_k8s import tune_kubernetes
from speech.errors import PlanInputError
from speech.files import load_artifact, write_artifact
from speech.plan.forecast import forecast_rate
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.bounds import SLO_SHARE
from speech.schema.config import PlanInputs
from speech.sim.artifact import TuneArtifact, TuneCheck, TunedValue, TunePromise
from speech.sim.crowd_check import check_record
from speech.sim.hpa_artifact import HpaTuneArtifact
from speech.sim.instance import build_instance
from speech.sim.traces import TraceError, parse_spec, peak_rps
from speech.sim.tune import KNOBS, MAX_PAIR_MOVES, SIMULATOR_VERSION, Candidate, Tuner, describe_plan, knob_reasons, perturbations

MAX_DRAWS = 50


def with_options(spec: str, **opts) -> str:
    """The spec with keys set (replacing any already there)."""

    kind, path, old = parse_spec(spec)
    old.update({k: str(v) for k, v in opts.items()})
    head = kind if path is None else f"{kind}:{path}"
    body = ",".join(f"{k}={v}" for k, v in old.items())
    return f"{head}{',' if path is not None else ':'}{body}" if body else head


def draw(spec: str, seed: int) -> np.ndarray:
    """One draw of the traffic: the trace ``spec`` with its generator (or superposition) seed set."""
    return load_trace(with_options(spec, seed=seed)).arrivals


def _promise(c: Candidate, target: float, spec: str, digest: str, seed: int, trace_hours: float) -> TunePromise:
    """What ``c`` promises over its draws: the plan's promise (:meth:`TunePromise.plan_promise`) and the
    search's numbers beside it."""
    return TunePromise(
        slo_share=round(c.share, 6), rejected_share=round(c.rejected, 6), instance_hours=round(c.hours, 3),
        cost_vs_floor=round(c.x_floor, 4), trace_sha256=digest, seed=seed, simulator_version=SIMULATOR_VERSION,
        trace_hours=trace_hours, **_interval(c), slo_share_target=target, within_slo_share_worst_day=round(c.worst_share, 6),
        trace=spec, slo_share_bound_sd=round(c.share_bound.sd, 6),
        slo_share_bound_t=None if c.share_bound.t is None else round(c.share_bound.t, 4), draws=len(c.days),
    )


def _interval(c: Candidate) -> dict[str, float]:
    """The promise's interval over the draws and the bound it was chosen by (rounded as the
    promise's other numbers)."""
    return {"slo_share_low": round(c.worst_share, 6), "slo_share_high": round(c.best_share, 6),
            "slo_share_bound": round(c.share_bound.bound, 6),
            "instance_hours_low": round(c.hours_low, 3), "instance_hours_high": round(c.hours_high, 3)}


@dataclass(frozen=True)
class TuneOutcome:
    """What :func:`tune` made: the tune artifact (an HPA's for ``--platform kubernetes``) and the files
    written, in order."""

    artifact: TuneArtifact | HpaTuneArtifact
    written: list[Path]

    @property
    def held(self) -> bool:
        return self.artifact.held


def tune(args: argparse.Namespace) -> TuneOutcome:
    """Tune the plan (or the HPA) for the parsed flags of ``bench tune`` and write the artifacts;
    :class:`~bench.errors.UsageError` for bad input (nothing written)."""
    if not SLO_SHARE.holds(args.slo_share):  # a caller that did not parse the flag (its range is this bound)
        raise UsageError(f"--slo-share {args.slo_share:g}: outside {RANGES['--slo-share'].text()} (e.g. 0.995)")
    if args.draws < 1 or args.holdout_days < 0:
        raise UsageError(f"--draws {args.draws} / --holdout-days {args.holdout_days}: need at least 1 draw "
                         "and 0 or more held-out days")
    if args.draws > MAX_DRAWS:
        raise UsageError(f"--draws {args.draws}: at most {MAX_DRAWS} (each candidate is simulated on every draw)")
    q = load_artifact(args.qmax, QmaxArtifact)
    t = load_artifact(args.ttotal, TtotalArtifact)
    if q.q_max < 1:
        raise UsageError(f"--qmax {args.qmax}: Q_max is 0 (no level met the SLO); there is nothing to tune")
    try:
        train = [(i, draw(args.trace, args.seed + i)) for i in range(args.draws)]
        hold = [(1000 + i, draw(args.trace, args.seed + args.draws + i)) for i in range(args.holdout_days)]
    except TraceError:
        raise
    first = train[0][1]
    if first.sum() <= 0:
        raise UsageError(f"--trace {args.trace!r}: the trace has no requests")
    peak = args.peak_rps if args.peak_rps is not None else round(peak_rps(first), 3)
    w = min(60, first.size)
    c = np.concatenate([[0.0], np.cumsum(first)])
    trough = args.trough_rps if args.trough_rps is not None else round(min(max(float(((c[w:] - c[:-w]) / w).min()), 1e-3), peak), 3)
    try:
        inputs = PlanInputs(slo_ms=args.slo_ms if args.slo_ms is not None else q.slo.ttfab_p95_ms, surge_ratio=args.surge_ratio,
                            peak_rps=peak, trough_rps=trough)
    except ValueError as err:
        raise UsageError(f"plan inputs from the trace and flags are invalid: {err}; pass --peak-rps/--trough-rps") from None
    model = build_instance(q, t, slo_ms=inputs.slo_ms)
    if args.platform == "kubernetes":
        hpa, path = tune_kubernetes(args, q, t, inputs, model, train, hold)
        return TuneOutcome(hpa, [path])

    progress = RunProgress("tune", total=None, enabled=wanted(args), unit="simulated days", every_s=5.0)

    def tick() -> None:
        progress.advance(1)

    lengths = {a.size for _, a in train}
    rate = np.mean(np.stack([a for _, a in train]), axis=0) if len(lengths) == 1 else None
    history = None
    if getattr(args, "forecast_history", None):
        _, history = load_history(args.forecast_history, None)
        try:  # the history must hold a forecast before the search relies on it
            forecast_rate(history, quantile=0.9)
        except PlanInputError as err:
            raise UsageError(f"--forecast-history {args.forecast_history!r}: {err}") from None
    with process_map(args.jobs) as (pmap, width):
        tuner = Tuner(q, t, inputs, model, args.slo_share, on_eval=tick, schedule_rate=rate, map_fn=pmap, width=width,
                      forecast_history=history)
        tuner.see_training(train)  # the fixed-peak floor is one of the choices: count it in the progress total
        options = tuner.choices(tuner.seed_knobs())
        # two passes over the one-knob moves, one pair step (speech.sim.tune.MAX_PAIR_MOVES), the checks: an
        # estimate, since a challenger stops at the first draw that shows it cannot win
        expected = len(train) * (1 + 2 * sum(len(v) - 1 for v in options.values()) + MAX_PAIR_MOVES) + 2 * (len(hold) + 2)
        progress.set_total(expected)
        try:
            seed, best = tuner.search(train)
            spike_factor = float(parse_spec(args.trace)[2].get("spike_factor", 1.2))
            spiked = (draw(with_options(args.trace, spike_factor=spike_factor * args.surge_ratio), args.seed)
                      if parse_spec(args.trace)[0] == "diurnal" else None)
            shift = 3600 if first.size >= 4 * 3600 else max(1, first.size // 24)
            perturbed = perturbations(first, args.surge_ratio, spike_arrivals=spiked, shift_s=shift)
            checks = []
            days = [(f"held-out seed {args.seed + args.draws + i}", i_a) for i, i_a in enumerate(hold)]
            days += [(name, (2000 + j, a)) for j, (name, a) in enumerate(perturbed.items())]
            bare = replace(best.knobs, scheduled_floors=False) if best.knobs.scheduled_floors else None
            # every check at once: seed, winner (and without its floors) on every day (the checks read no
            # floor), with the floors the promises' cost_vs_floor reads, while the pool runs
            tuner.prefetch((k, day) for _, day in days for k in (seed.knobs, best.knobs, bare) if k is not None)
            tuner.ensure_floors(seed, best)
            for name, day in days:
                s_c, b_c = tuner.candidate(seed.knobs, [day]), tuner.candidate(best.knobs, [day])
                assert s_c is not None and b_c is not None  # search returns knobs that have a plan
                n_c = tuner.candidate(bare, [day]) if bare is not None else None
                checks.append(TuneCheck(day=name, seed_within_slo_share=round(s_c.worst_share, 6),
                                        seed_instance_hours=round(s_c.hours, 3), tuned_within_slo_share=round(b_c.worst_share, 6),
                                        tuned_instance_hours=round(b_c.hours, 3), tuned_keeps_share=b_c.worst_share >= args.slo_share,
                                        without_floors_within_slo_share=None if n_c is None else round(n_c.worst_share, 6),
                                        without_floors_instance_hours=None if n_c is None else round(n_c.hours, 3)))
        finally:
            progress.close()

    digest = hashlib.sha256(b"".join(np.asarray(a, dtype=np.float64).tobytes() for _, a in train)).hexdigest()
    sd, bd = describe_plan(tuner.seed_numbers, seed.knobs), describe_plan(tuner.numbers_for(best.knobs), best.knobs)
    reasons = knob_reasons(seed.knobs, best.knobs, fixed_peak_instances=tuner.fixed_peak_instances(),
                           startup_s=tuner.model.startup_s)
    trace_hours = round(first.size / 3600, 3)
    promised = _promise(best, args.slo_share, args.trace, digest, args.seed, trace_hours)
    best_inputs = tuner.inputs_for(best.knobs)
    assert best_inputs is not None  # the search only keeps knobs whose plan was built
    tuned_inputs = best_inputs.model_copy(update={"promise": promised.plan_promise(), "reasons": reasons})

    tuned_plan = build_plan(q, t, tuned_inputs, allow_config_mismatch=True)
    values = [TunedValue(knob=k, seed=sd[k], tuned=bd[k], deployable_now=True,
                         reason=reasons.get(k, "the seed formula kept" if sd[k] == bd[k] else
                                            "the seed formula kept; its value follows the tuned inputs above")) for k in KNOBS]
    art = TuneArtifact(
        model=q.model, qmax_sha256=canonical_sha256(q), ttotal_sha256=canonical_sha256(t),
        seed_plan_sha256=canonical_sha256(tuner.seed_plan), tuned_plan_sha256=canonical_sha256(tuned_plan),
        promise=promised, seed=_promise(seed, args.slo_share, args.trace, digest, args.seed, trace_hours),
        values=values, checks=checks, held=all(c.tuned_keeps_share for c in checks) and best.worst_share >= args.slo_share,
        evaluations=tuner.evaluations, created_at=datetime.now(UTC),
        crowd_check=None if tuner.crowd_check is None else check_record(tuner.crowd_check),
    )
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in parse_spec(args.trace)[0])
    written = [write_artifact(args.out / f"plan-{q.model}-tuned.json", tuned_plan),
               write_artifact(args.out / f"tune-{q.model}-{safe}.json", art)]
    return TuneOutcome(art, written)
