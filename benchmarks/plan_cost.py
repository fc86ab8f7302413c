"""What each scaling policy costs for the SLO it keeps, on five traces, against the floor (issue 32).

    .venv/bin/python benchmarks/plan_cost.py [--train-draws 5] [--unseen 5]
        [--traces diurnal,azure-conv,azure-code,two-peak,week]

For each trace: the seed plan (bench plan's formulas, planned from the first training draw's
busiest and quietest minute), the plan tuned by ``speech.sim.tune`` on the training draws (the
share bound for an unseen draw, speech.sim.tune.unseen_share_bound, must keep the target: ``bench
tune --draws``), the other policies of ``bench simulate`` (reference, pressure, qps-ewma, kpa, fixed-peak: a fleet
sized for the training draws' busiest minute, what can be deployed from traffic seen) and the two clairvoyant rows:
perfect-forecast (the plan's mechanics with the future known) and the floor (no start-up, one change
a minute, the share over the whole trace). Every policy runs on ``--unseen`` draws the tuner did not
see (the next seeds); per policy: SLO share mean and lowest over the draws, rejected share,
instance-hours (mean), x floor and x perfect-forecast (means of the per-draw ratios), actions,
refused changes, flaps. target-floor (a per-second schedule) is left out: no endpoint runs it.

two-peak is this benchmark's own day: a morning and an evening peak and three 10-minute flash
crowds (x1.5) at seeded hours, so a draw the tuner did not see has its crowds at hours its
training draws did not have. There the tuned plan is also run with daily floors scheduled from
the unseen draw itself (speech.plan.schedule, as if its crowds' hours had been known): what that
saves is the price of the surprise; the rest of the gap, to perfect-forecast, is what the plan's
reactive scaling cannot win even knowing the hours.

Forecast floors (issue 45): on the day traces the training draws are also the history, five
consecutive days ending at the 00:00 the unseen draws start at; the tuner's forecast knobs
(forecast_quantile, busy_headroom: speech.plan.forecast) learn from it, and beside the tuned plan
run the baselines a user would pick instead: ``predictive`` (speech.sim.predictive, the tuned
knobs' reactive policy underneath, the same history) and, when the tuned plan has forecast floors,
the same knobs with today's learned daily floors and with a seasonal-naive forecast (when the
forecast the backtest kept is not seasonal-naive itself; when it is, a verdict line says so).

The targets, each marked held or not: the tuned plan keeps >= 99.5 % on every unseen draw (on
two-peak also on the 25 further draws); no deployable policy keeps its share on every draw for
less; the tuned plan's cost against the floor (FLOOR_TARGETS: issue 45's, azure-conv no worse than
before); the tuned plan beats each baseline row (cheaper, or the baseline missed the share).

Reference measurements (artifacts/reference), SLO 3000 ms, SLO share 0.995. The week: three weeks
of history (seeds 1..3, Monday first), forecast a week ahead with a weekly season (floors per
weekday, cron(M H ? * MON *)); the tuner trains on them and every policy is judged on ``--unseen``
weeks after the history (seeds 4..): the slowest part.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs
    from speech.sim.instance import InstanceModel
    from speech.sim.scaler import ScalingNumbers
    from speech.sim.tune import Candidate, Tuner

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
TRACES = {
    "diurnal": "diurnal:peak=5000",
    "azure-conv": "azure-conv:peak=500",
    "azure-code": "azure-code:peak=500",
    "two-peak": "two-peak:peak=5000",
    "week": "week:peak=5000",
}
OTHERS = ("reference", "pressure", "qps-ewma", "kpa", "fixed-peak")
SLO_MS, SLO_SHARE = 3000.0, 0.995
FLOOR_TARGETS = {"diurnal": 1.08, "week": 1.10, "azure-code": 1.30, "two-peak": 1.8, "azure-conv": 1.22}
"""Issue 45's targets, x the floor (azure-conv: no worse than the 1.22x measured before it)."""
KNOWN = "tuned + floors for the draw's own crowds"


def week(seed: int, peak: float = 5000.0, weekend_share: float = 0.45):
    """Seven diurnal days, Monday first: weekdays peaking at ``peak``, Saturday and Sunday at
    ``weekend_share`` of it (troughs at peak / 20 throughout), 3 spikes a day."""
    import numpy as np

    from speech.sim.traces import diurnal_rate, poisson_arrivals

    days = []
    for d in range(7):
        top = peak * (weekend_share if d >= 5 else 1.0)
        days.append(diurnal_rate(peak=top, trough=peak / 20, duration_s=86400, spikes=3, spike_factor=1.2, spike_s=300,
                                 seed=seed * 10 + d))
    return poisson_arrivals(np.concatenate(days), seed)


def two_peak(seed: int, peak: float = 5000.0, crowds: int = 3, crowd_factor: float = 1.5, crowd_s: int = 600):
    """A day with a morning peak (10:00, at ``peak``) and an evening one (20:00, at 0.8 of it) over a
    trough of peak / 20, and ``crowds`` flash crowds (60 s ramps, ``crowd_s`` held, x``crowd_factor``)
    at hours drawn from the seed between 07:00 and 23:00; Poisson seconds."""
    import numpy as np

    from speech.sim.traces import poisson_arrivals

    t = np.arange(86400, dtype=float)
    trough = peak / 20

    def bump(at_h: float, width_h: float) -> np.ndarray:
        return np.exp(-0.5 * ((t / 3600 - at_h) / width_h) ** 2)

    rate = trough + (peak - trough) * np.maximum(bump(10.0, 2.0), 0.8 * bump(20.0, 1.5))
    rng = np.random.default_rng(seed * 7919 + 17)
    boost = np.zeros(t.size)
    for start in rng.uniform(7 * 3600, 23 * 3600 - crowd_s - 120, size=crowds):
        up = np.clip((t - start) / 60.0, 0.0, 1.0)
        down = np.clip((start + 120 + crowd_s - t) / 60.0, 0.0, 1.0)
        boost = np.maximum(boost, np.minimum(up, down))
    return poisson_arrivals(rate * (1.0 + (crowd_factor - 1.0) * boost), seed)


def day(spec: str, seed: int):
    if spec.startswith("week"):
        return week(seed)
    if spec.startswith("two-peak"):
        return two_peak(seed)
    from bench.load.traces import load_trace
    from bench.operations.tune import with_options

    return load_trace(with_options(spec, seed=seed)).arrivals


def reference_model() -> tuple[QmaxArtifact, TtotalArtifact, InstanceModel]:
    """The reference measurements and the instance model the simulator builds from them at the SLO."""
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.sim.instance import build_instance

    q, t = load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact)
    return q, t, build_instance(q, t, slo_ms=SLO_MS)


@dataclass
class TunedTrace:
    """One trace's training draws, first unseen draw, seed plan (in ``tuner``) and tuned plan."""

    name: str
    spec: str
    train: list[tuple[int, np.ndarray]]
    test: np.ndarray
    tuner: Tuner
    best: Candidate
    tune_s: float
    tune_cpu_s: float = 0.0
    """This process's CPU seconds for the tuning: on a shared machine the wall time moves with the load."""
    history_draws: int = 0
    """Draws before the judged ones (seeds 1..history_draws): the training draws and, on the week,
    the weeks of history before the one it trains on."""

    @property
    def test_seed(self) -> int:
        return 1 + max(self.history_draws, len(self.train))

    @property
    def warm_x_rps(self) -> float:
        """Every scaling fleet opens sized for the test day's first minute at the seed plan's
        X(C_scale_max)."""
        return self.tuner.seed_plan.capacity.throughput_at_target_rps

    @property
    def tuned_numbers(self) -> ScalingNumbers:
        return self.tuner.numbers_for(self.best.knobs)


def seed_inputs(first: np.ndarray) -> PlanInputs:
    """The seed plan's inputs from a draw: its busiest minute as the peak, its quietest as the trough."""
    import numpy as np

    from speech.schema.config import PlanInputs
    from speech.sim.traces import peak_rps

    c = np.concatenate([[0.0], np.cumsum(first)])
    trough = round(max(float(((c[60:] - c[:-60]) / 60).min()), 1e-3), 3)
    return PlanInputs(slo_ms=SLO_MS, peak_rps=round(peak_rps(first), 3), trough_rps=trough)


WEEK_HISTORY = 3
"""Weeks of history before the week's judged draws (seeds 1..3): a weekly season needs three, two to
fit and one to check. The tuner trains on all three, as the day traces train on their history: on
one week the share bound is that week's own share (no spread to bound with), and a plan tuned to
99.52 % on seed 3 fell to 99.48 % on one of five unseen weeks."""


def forecast_history(train: list[tuple[int, np.ndarray]]) -> np.ndarray | None:
    """The training draws as consecutive days (weeks) of history, ending at the 00:00 (Monday
    00:00) the judged draws start at: what forecast floors and the predictive baseline learn from.
    None where they are not whole days or weeks (the Azure hours) or fewer than three (a forecast
    checks on the last, fits on two)."""
    import numpy as np

    if len(train) < 3 or len({a.size for _, a in train}) != 1 or train[0][1].size not in (86400, 7 * 86400):
        return None
    return np.concatenate([a for _, a in train])


def season_days(arrivals: np.ndarray) -> int:
    """The forecast's season for draws of this length: a week for the week trace, else a day."""
    return 7 if arrivals.size == 7 * 86400 else 1


def tune_trace(name: str, q: QmaxArtifact, t: TtotalArtifact, model: InstanceModel, train_days: int = 5,
               miss_chance: float | None = None, forecast_model: str = "auto") -> TunedTrace:
    """The seed plan from the first training draw's busiest and quietest minute, tuned on the
    training seeds 1..train_days (the share bound for unseen draws, speech.sim.tune.unseen_share_bound,
    must keep the target); the test day is the next seed. The week: :data:`WEEK_HISTORY` weeks of
    history (seeds 1..3), a weekly forecast of them (floors per weekday), trained on them."""
    import numpy as np

    from speech.sim.tune import Tuner

    spec = TRACES[name]
    t0, cpu0 = time.monotonic(), time.process_time()
    history = [(i, day(spec, 1 + i)) for i in range(WEEK_HISTORY if name == "week" else train_days)]
    train = history
    test = day(spec, 1 + len(history))
    first = train[0][1]
    inputs = seed_inputs(first)
    from speech.sim.names import PROMISE_MISS_CHANCE

    # Scheduled floors are learned from the training draws' mean rate, as bench tune does; not on the week:
    # the floors are daily, so a week's mean would set weekend floors from weekdays.
    lengths = {a.size for _, a in train}
    rate = np.mean(np.stack([a for _, a in train]), axis=0) if len(lengths) == 1 and first.size <= 86400 else None
    tuner = Tuner(q, t, inputs, model, SLO_SHARE, schedule_rate=rate,
                  miss_chance=PROMISE_MISS_CHANCE if miss_chance is None else miss_chance,
                  forecast_history=forecast_history(history), forecast_model=forecast_model,
                  forecast_season_days=season_days(first))
    _, best = tuner.search(train, passes=2)
    return TunedTrace(name, spec, train, test, tuner, best, time.monotonic() - t0, time.process_time() - cpu0,
                      history_draws=len(history))


@dataclass
class Row:
    """One policy over the unseen draws."""

    label: str
    shares: list[float]
    rejected: list[float]
    hours: list[float]
    x_floor: list[float]
    x_pf: list[float]
    out: int
    in_: int
    refused: int
    flaps: int

    @property
    def share(self) -> float:
        return sum(self.shares) / len(self.shares)

    @property
    def low(self) -> float:
        return min(self.shares)

    @property
    def mean_hours(self) -> float:
        return sum(self.hours) / len(self.hours)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def baselines(tt: TunedTrace, q, model) -> dict:
    """The forecast baselines beside the tuned plan, label -> (arrivals -> Policy): ``predictive``
    (speech.sim.predictive, the tuned knobs' reactive policy underneath, learning from the same
    history as the forecast), and where the tuned plan has forecast floors, the same knobs with
    the floors learned from the training draws' mean (today's scheduled floors) and with a
    seasonal-naive forecast instead of the model."""
    from dataclasses import replace

    from speech.sim.policies import AwsPolicy
    from speech.sim.predictive import PredictivePolicy
    from speech.sim.tune import Tuner

    tu, k = tt.tuner, tt.best.knobs
    hist = tu.forecast_history
    out: dict = {}
    bare = replace(k, scheduled_floors=False, forecast_quantile=None, busy_headroom=None)
    if hist is not None and tu.plan_for(bare) is not None:
        nb = tu.numbers_for(bare)
        out["predictive (AWS, tuned knobs underneath)"] = lambda a: PredictivePolicy(
            AwsPolicy(nb, model.cloudwatch_ratio, model.q_max), hist, per_instance_rps=nb.x_target_rps,
            buffer_s=nb.planning_total_s)
    if k.forecast_quantile is not None or k.busy_headroom is not None:
        learned = replace(k, forecast_quantile=None, busy_headroom=None, scheduled_floors=True)
        if tu.plan_for(learned) is not None:
            nl = tu.numbers_for(learned)
            out["tuned knobs + learned daily floors"] = lambda a: AwsPolicy(nl, model.cloudwatch_ratio, model.q_max)
        naive = Tuner(tu.qmax, tu.ttotal, tu.inputs, model, SLO_SHARE, forecast_history=hist, forecast_model="seasonal-naive",
                      forecast_season_days=tu.forecast_season_days)
        if _forecast_model(tt) != "seasonal-naive" and naive.plan_for(k) is not None:  # else it is the tuned plan's row
            nn = naive.numbers_for(k)
            out["tuned knobs + seasonal-naive floors"] = lambda a: AwsPolicy(nn, model.cloudwatch_ratio, model.q_max)
    return out


JUMP_ROWS = (3.0, 1.5)
"""The emergency step's jump ratios run beside the tuned plan (speech.sim.knobs.Knobs.jump_ratio, 10 s
windows): the QPS design's rule (more than 200 % up in one window) and a flash crowd's x1.5."""
WITHOUT = "tuned, without "


def ablation(tt: TunedTrace, model) -> dict:
    """Which knob bought what, label -> (arrivals -> Policy): the tuned plan with each knob it moved
    from the seed set back to the seed's value (a forecast knob: off), and the tuned plan with the
    simulator's emergency step added (:data:`JUMP_ROWS`). A knob whose plan the plan refuses alone
    (e.g. a target share outside the surge rule at the seed's surge ratio) is left out."""
    from dataclasses import replace

    from speech.sim.policies import AwsPolicy
    from speech.sim.tune import KNOBS, describe_plan, move

    tu, k, seed = tt.tuner, tt.best.knobs, tt.tuner.seed_knobs()
    seed_said = describe_plan(tu.seed_numbers, seed)
    out: dict = {}
    for name in KNOBS:
        if getattr(k, name) == getattr(seed, name):
            continue
        off = move(k, name, getattr(seed, name))
        if tu.plan_for(off) is not None:
            n = tu.numbers_for(off)
            out[f"{WITHOUT}{name} (seed's {seed_said[name]})"] = lambda a, n=n: AwsPolicy(n, model.cloudwatch_ratio, model.q_max)
    for r in JUMP_ROWS:
        n = tu.numbers_for(replace(k, jump_ratio=r))
        out[f"tuned + emergency step x{r:g} in 10 s"] = lambda a, n=n: AwsPolicy(n, model.cloudwatch_ratio, model.q_max)
    return out


def _forecast_model(tt: TunedTrace) -> str | None:
    """The model of the forecast under the tuned plan's floors (the backtest's choice), None without one."""
    from speech.sim.tune import DEFAULT_HEADROOM_QUANTILE

    k = tt.best.knobs
    if k.forecast_quantile is None and k.busy_headroom is None:
        return None
    return str(tt.tuner.forecast(k.forecast_quantile or DEFAULT_HEADROOM_QUANTILE).model)


def judge(tt: TunedTrace, q, model, draws: list[tuple[int, np.ndarray]], extra: dict | None = None,
          only: set[str] | None = None, more: dict | None = None) -> list[Row]:
    """Every policy on every unseen draw: the rows of the table (``extra``: label -> ScalingNumbers
    of further tuned plans, e.g. the in-sample ones, keyed by draw seed; ``only``: just these labels,
    and the floor their cost is measured against)."""
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.floor import floor_schedule
    from speech.sim.floor_policies import PerfectForecastPolicy
    from speech.sim.peers import ScheduledPolicy
    from speech.sim.policies import AwsPolicy, make_policy
    from speech.sim.traces import peak_rps

    plan, warm = tt.tuner.seed_plan, tt.warm_x_rps
    s = tt.tuner.seed_numbers
    acc: dict[str, list] = {}
    for seed, a in draws:
        f = floor_schedule(model, a, SLO_MS, SLO_SHARE)
        pols = [("seed plan", make_policy("plan", plan=plan, qmax=q, model=model, arrivals=a, peak_rps=peak_rps(a))),
                ("tuned plan", AwsPolicy(tt.tuned_numbers, model.cloudwatch_ratio, model.q_max, name="tuned plan"))]
        for label, by_seed in (extra or {}).items():
            pols.append((label, AwsPolicy(by_seed[seed], model.cloudwatch_ratio, model.q_max, name=label)))
        for label, make in (more or {}).items():
            pols.append((label, make(a)))
        # fixed-peak is sized for the busiest minute of the training draws: what a team can deploy from the
        # traffic it has seen (sized for an unseen draw's own busiest minute it would know that draw's crowds)
        seen_peak = tt.tuner.train_peak_rps if tt.tuner.train_peak_rps is not None else peak_rps(a)
        pols += [(p, make_policy(p, plan=plan, qmax=q, model=model, arrivals=a, slo_share=SLO_SHARE,
                                 peak_rps=seen_peak if p == "fixed-peak" else peak_rps(a)))
                 for p in OTHERS]
        pols += [("perfect-forecast", PerfectForecastPolicy(f.per_second, startup_s=model.startup_s, removal_updating_s=60.0,
                                                            tick_s=s.metric_period_s, min_instances=s.min_instances,
                                                            max_instances=s.max_instances)),
                 ("floor", ScheduledPolicy("floor", f.per_second, "floor"))]
        if only is not None:
            pols = [(label, pol) for label, pol in pols if label in only or label == "floor"]
        sums = {label: summarize(run_policy(model, a, pol, warm_x_rps=warm), model, SLO_MS, plan.t_total.planning_s)
                for label, pol in pols}
        fl = sums["floor"].instance_hours
        pf = sums["perfect-forecast"].instance_hours if "perfect-forecast" in sums else float("nan")
        for label, x in sums.items():
            acc.setdefault(label, []).append((x, x.instance_hours / fl, x.instance_hours / pf))
    rows = []
    for label, got in acc.items():
        xs = [g[0] for g in got]
        rows.append(Row(label, [x.within_slo_share for x in xs], [x.rejected_share for x in xs],
                        [x.instance_hours for x in xs], [g[1] for g in got], [g[2] for g in got],
                        sum(x.scale_out_actions for x in xs), sum(x.scale_in_actions for x in xs),
                        sum(x.refused_changes for x in xs), sum(x.flaps for x in xs)))
    return rows


def _print_ablation(rows: list[Row], tp: Row) -> None:
    """Which knob bought what: each ablation row (:func:`ablation`) against the tuned plan."""
    ab = [r for r in rows if r.label.startswith((WITHOUT, "tuned + emergency"))]
    if not ab:
        return
    print("\nWhich knob bought what (the tuned plan with one knob back at the seed's, or the emergency step added; "
          "same unseen draws):\n")
    print("| change | in SLO mean | in SLO lowest | draws below the target | inst-h | x floor | inst-h vs tuned |")
    print("|---|---|---|---|---|---|---|")
    for r in [tp, *ab]:
        below = sum(1 for x in r.shares if x < SLO_SHARE)
        print(f"| {r.label} | {100 * r.share:.2f}% | {100 * r.low:.2f}% | {below} of {len(r.shares)} | {r.mean_hours:,.1f} | "
              f"{_mean(r.x_floor):.2f} | {r.mean_hours - tp.mean_hours:+,.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-draws", "--train-days", dest="train_draws", type=int, default=5)
    ap.add_argument("--unseen", type=int, default=5, help="unseen draws every policy is judged on (default 5)")
    ap.add_argument("--traces", default=",".join(TRACES))
    ap.add_argument("--tail-draws", type=int, default=25,
                    help="further unseen draws the tuned plan and every deployable policy that kept the share on the "
                         "--unseen draws for less are also run on: whether keeping it there was the draws' luck "
                         "(default 25; 0: none)")
    ap.add_argument("--miss-chance", type=float, default=None,
                    help="the tuner's share bound: the chance any of 5 unseen draws falls below it (default "
                         "speech.sim.names.PROMISE_MISS_CHANCE)")
    args = ap.parse_args()

    from speech.sim.tune import Tuner, describe_plan

    q, t, model = reference_model()
    verdicts = []
    t_all = time.monotonic()
    for name in [x.strip() for x in args.traces.split(",") if x.strip()]:
        tt = tune_trace(name, q, t, model, args.train_draws, args.miss_chance)
        first = tt.test_seed
        draws = [(seed, day(tt.spec, seed)) for seed in range(first, first + args.unseen)]
        t0 = time.monotonic()
        extra = None
        if name == "two-peak":
            # The tuned knobs with floors scheduled from each unseen draw itself: its crowds' hours known.
            from dataclasses import replace

            known = {}
            for seed, a in draws:
                tu = Tuner(q, t, tt.tuner.inputs, model, SLO_SHARE, schedule_rate=a)
                # the draw's own floors replace any forecast floors the tuned plan has
                with_floors = replace(tt.best.knobs, scheduled_floors=True, forecast_quantile=None, busy_headroom=None)
                if tu.plan_for(with_floors) is None:
                    # the tuned floor already covers the whole day (the fixed-peak fleet): schedule above the seed's
                    with_floors = replace(with_floors, min_instances=tt.tuner.seed_knobs().min_instances)
                known[seed] = tu.numbers_for(with_floors)
            extra = {KNOWN: known}
        rows = judge(tt, q, model, draws, extra, more={**baselines(tt, q, model), **ablation(tt, model)})
        by = {r.label: r for r in rows}
        total = sum(float(a.sum()) for _, a in draws)
        print(f"\n### {tt.spec} ({args.unseen} unseen draws: seeds {first}..{first + args.unseen - 1}, "
              f"{draws[0][1].size / 3600:.1f} h each, {total / len(draws):,.0f} requests a draw; tuned on seeds "
              f"{tt.train[0][0] + 1}..{tt.train[-1][0] + 1}"
              + ("" if tt.tuner.forecast_history is None else
                 f" (forecast history: seeds 1..{tt.history_draws}, {tt.tuner.forecast_season_days}-day season)")
              + f" in {tt.tune_s:.0f} s, CPU {tt.tune_cpu_s:.0f} s, {tt.tuner.simulated} simulated days"
              + ("" if tt.tuner.simulated_plain is None else f", {tt.tuner.simulated_plain} by the plain descent")
              + "; "
              f"judged in {time.monotonic() - t0:.0f} s)\n")
        print("tuned plan: " + ", ".join(f"{k} {v}" for k, v in describe_plan(tt.tuned_numbers, tt.best.knobs).items()))
        b = tt.best.share_bound
        print(f"tuned plan on its training draws: SLO share mean {100 * b.mean:.2f}%, lowest {100 * tt.best.worst_share:.2f}%, "
              f"bound for an unseen draw {100 * b.bound:.2f}% (miss chance {tt.best.miss_chance:g} over 5 draws"
              + ("" if b.t is None else f", t {b.t:.2f}, sd {100 * b.sd:.3f} points") + ")")
        print("seed plan: " + ", ".join(f"{k} {v}" for k, v in describe_plan(tt.tuner.seed_numbers, tt.tuner.seed_knobs()).items()))
        print("\n| policy | in SLO mean | in SLO lowest | rejected | inst-h | x floor | x perfect-forecast | out | in | "
              "refused | flaps |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r.label} | {100 * r.share:.2f}% | {100 * r.low:.2f}% | {100 * _mean(r.rejected):.3f}% | "
                  f"{r.mean_hours:,.1f} | {_mean(r.x_floor):.2f} | {_mean(r.x_pf):.2f} | {r.out} | {r.in_} | {r.refused} | "
                  f"{r.flaps} |")
        tp = by["tuned plan"]
        _print_ablation(rows, tp)
        verdicts.append(f"tuned plan on {tt.spec}: lowest share over {args.unseen} unseen draws {100 * tp.low:.2f}% "
                        f"-> {'held' if tp.low >= SLO_SHARE else 'NOT held'}")
        # the emergency step is a simulator knob (nothing deploys it); the tuned plan with a knob
        # back at the seed's is deployable and counts
        deployable = [r for r in rows if r.label not in ("tuned plan", "floor", "perfect-forecast", KNOWN)
                      and not r.label.startswith("tuned + emergency")]
        beat = [r.label for r in deployable if r.low >= SLO_SHARE and r.mean_hours < tp.mean_hours]
        # two-peak's crowds fall where no training draw had them: its tuned plan runs on the further draws
        # whatever the first five said (issue 45: >= 99.5 % on all 30)
        tail_ran = (bool(beat) or name == "two-peak") and args.tail_draws > 0
        if tail_ran:
            # five draws cannot tell a plan that misses one day in seven from one that never does: the
            # ones that kept the share for less, and the tuned plan, on more draws nobody tuned on
            t0 = time.monotonic()
            start = first + args.unseen
            tail = [(seed, day(tt.spec, seed)) for seed in range(start, start + args.tail_draws)]
            tail_rows = {r.label: r for r in judge(tt, q, model, tail, only={"tuned plan", *beat},
                                                   more={**baselines(tt, q, model), **ablation(tt, model)})}
            print(f"\n{args.tail_draws} further unseen draws (seeds {start}..{start + args.tail_draws - 1}), for the "
                  f"tuned plan and what kept the share above for less, {time.monotonic() - t0:.0f} s:\n")
            print("| policy | in SLO mean | in SLO lowest | draws below the target | inst-h | x floor |")
            print("|---|---|---|---|---|---|")
            for label in ["tuned plan", *beat]:
                r = tail_rows[label]
                below = sum(1 for x in r.shares if x < SLO_SHARE)
                print(f"| {label} | {100 * r.share:.2f}% | {100 * r.low:.2f}% | {below} of {len(r.shares)} | "
                      f"{r.mean_hours:,.1f} | {_mean(r.x_floor):.2f} |")
            beat = [label for label in beat if tail_rows[label].low >= SLO_SHARE]
            verdicts.append(f"tuned plan on {tt.spec}: on {args.tail_draws} further draws the tuned plan's lowest share "
                            f"{100 * tail_rows['tuned plan'].low:.2f}% -> "
                            f"{'held' if tail_rows['tuned plan'].low >= SLO_SHARE else 'NOT held'}")
        verdicts.append(f"tuned plan on {tt.spec}: deployable policies keeping the share on every draw for less: "
                        f"{', '.join(beat) or 'none'} -> {'held' if not beat else 'NOT held'}"
                        + (f" (judged on {args.unseen} + {args.tail_draws} unseen draws)" if tail_ran else ""))
        if name in FLOOR_TARGETS:
            x, goal = _mean(tp.x_floor), FLOOR_TARGETS[name]
            verdicts.append(f"tuned plan on {tt.spec}: {x:.2f}x the floor (target <= {goal:g}x) -> "
                            f"{'held' if x <= goal + 0.005 else 'NOT held'}")
        for r in rows:
            if r.label.startswith(("predictive", "tuned knobs +")):
                cheaper = tp.mean_hours < r.mean_hours
                verdicts.append(f"tuned plan on {tt.spec} against {r.label}: {tp.mean_hours:,.1f} vs {r.mean_hours:,.1f} "
                                f"inst-h (lowest share {100 * tp.low:.2f}% vs {100 * r.low:.2f}%) -> "
                                f"{'beats it' if cheaper or r.low < SLO_SHARE else 'does NOT beat it'}")
        if _forecast_model(tt) == "seasonal-naive":
            verdicts.append(f"tuned plan on {tt.spec}: its forecast floors are seasonal-naive's (the backtest kept it: "
                            "no model beat it on the history's last days) -> a forecast beating seasonal-naive NOT held")
        if KNOWN in by:
            ins = by[KNOWN]
            gap = tp.mean_hours - by["floor"].mean_hours
            surprise = tp.mean_hours - ins.mean_hours
            verdicts.append(f"tuned plan on {tt.spec}: {_mean(tp.x_floor):.2f}x the floor, {_mean(tp.x_pf):.2f}x "
                            f"perfect-forecast; with floors scheduled for each draw's own crowds {_mean(ins.x_floor):.2f}x "
                            f"the floor (lowest share {100 * ins.low:.2f}%): knowing the hours would save {surprise:,.1f} of "
                            f"the {gap:,.1f} instance-hours between the tuned plan and the floor "
                            f"({100 * surprise / gap:.0f} %)" if gap > 0 else f"tuned plan on {tt.spec}: at the floor")
    print("\n### targets\n")
    for v in verdicts:
        print("- " + v)
    print(f"\ntotal {time.monotonic() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
