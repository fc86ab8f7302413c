"""The plan under each reading of what AWS does not document (issue 23; docs/design.md §10.3).

    .venv/bin/python benchmarks/aws_readings.py [--traces diurnal,azure-conv] [--train-days 2] [--json]

The simulator's AWS rules that no AWS page pins down are parameters with a stated default
(``speech.sim.policies.AwsReadings``): how many 10 s datapoints target tracking's hidden scale-out
alarm needs (3), and how long a removal keeps the endpoint Updating (60 s). This runs the seed plan
and the tuned plan of ``benchmarks/plan_cost.py`` (same reference measurements, SLO 3000 ms, SLO
share 0.995, trace seeds, tuning and opening fleet; its helpers, imported) on the held-out day under
each reading: the default; target tracking 1, 2 and 5 datapoints; removal Updating 0 and 300 s;
and, as the baseline that shows what a documented rule does, one change at a time switched off.
The plans stay as tuned under the default: the question is how far the result moves if AWS
behaves otherwise, not what a plan tuned for another reading would be.

Prints per trace and plan: reading | in SLO | rejected | inst-h | x floor | out | in | refused,
then "max move across the documented-unknown readings: X points of SLO share, Y % instance-hours"
(against the default row; the rule-off row is left out of it, it is not a reading of an unknown).
Progress on stderr; ``--json`` prints the same as one JSON object instead. Exit 0; 2 on bad input
(an unknown trace, a reference artifact missing), nothing on stdout; 130 interrupted.
About 25 s on 2 shared cores for the two default traces: the tuning (40-60 simulated days a trace) is most of
it, then 14 runs of the test day a trace and one of the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.plan_cost import SLO_MS, SLO_SHARE, TRACES, reference_model, tune_trace  # noqa: E402
from speech.sim.policies import AwsReadings  # noqa: E402

DEFAULT_TRACES = ("diurnal", "azure-conv")
PLANS = ("seed plan", "tuned plan")


@dataclass(frozen=True)
class Reading:
    label: str
    readings: AwsReadings
    unknown: bool
    """A reading of something AWS does not document (counted in the max move); False for the
    documented rule switched off, shown as the baseline of what the rule does."""


READINGS = (
    Reading("default: TT 3, removal 60 s", AwsReadings(), True),
    Reading("TT 1 datapoint", AwsReadings(target_tracking_datapoints=1), True),
    Reading("TT 2 datapoints", AwsReadings(target_tracking_datapoints=2), True),
    Reading("TT 5 datapoints", AwsReadings(target_tracking_datapoints=5), True),
    Reading("removal 0 s", AwsReadings(removal_updating_s=0.0), True),
    Reading("removal 300 s", AwsReadings(removal_updating_s=300.0), True),
    Reading("one at a time off (rule, not a reading)", AwsReadings(one_change_at_a_time=False), False),
)


@dataclass(frozen=True)
class Row:
    reading: str
    unknown: bool
    within_slo_share: float
    rejected_share: float
    instance_hours: float
    x_floor: float
    scale_out_actions: int
    scale_in_actions: int
    refused_changes: int
    sim_s: float


@dataclass(frozen=True)
class Move:
    """The largest change from the default row over the documented-unknown readings."""

    slo_share_points: float
    """Percentage points of the share of requests within the SLO."""
    slo_share_reading: str
    instance_hours_pct: float
    """Percent of the default row's instance-hours."""
    instance_hours_reading: str
    keeps_slo_share: int
    """Unknown readings (default included) under which the plan keeps the SLO share."""
    readings: int


def max_move(rows: list[Row]) -> Move:
    """Largest |share - default share| (points) and |inst-h / default inst-h - 1| (%) over the
    rows marked unknown; the first row is the default."""
    base, unknown = rows[0], [r for r in rows if r.unknown]
    share = max(unknown, key=lambda r: abs(r.within_slo_share - base.within_slo_share))
    hours = max(unknown, key=lambda r: abs(r.instance_hours / base.instance_hours - 1.0))
    return Move(
        slo_share_points=100.0 * (share.within_slo_share - base.within_slo_share),
        slo_share_reading=share.reading,
        instance_hours_pct=100.0 * (hours.instance_hours / base.instance_hours - 1.0),
        instance_hours_reading=hours.reading,
        keeps_slo_share=sum(1 for r in unknown if r.within_slo_share >= SLO_SHARE),
        readings=len(unknown),
    )


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_trace(name: str, q, t, model, train_days: int) -> dict:
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.floor_policies import FloorPolicy
    from speech.sim.policies import AwsPolicy
    from speech.sim.scaler import scaling_numbers

    log(f"[{name}] tuning on {train_days if name != 'week' else 1} training day(s) ...")
    tt = tune_trace(name, q, t, model, train_days)
    log(f"[{name}] tuned in {tt.tune_s:.1f} s ({tt.tuner.evaluations} simulated days)")
    planning_s = tt.tuner.seed_plan.t_total.planning_s
    floor = summarize(run_policy(model, tt.test, FloorPolicy(model, tt.test, SLO_MS, SLO_SHARE)), model, SLO_MS, planning_s)
    numbers = {"seed plan": scaling_numbers(tt.tuner.seed_plan), "tuned plan": tt.tuned_numbers}
    plans = {}
    for plan in PLANS:
        rows = []
        for rd in READINGS:
            t0 = time.monotonic()
            pol = AwsPolicy(numbers[plan], model.cloudwatch_ratio, model.q_max, readings=rd.readings)
            s = summarize(run_policy(model, tt.test, pol, rd.readings, warm_x_rps=tt.warm_x_rps), model, SLO_MS, planning_s)
            rows.append(Row(rd.label, rd.unknown, s.within_slo_share, s.rejected_share, s.instance_hours,
                            s.instance_hours / floor.instance_hours, s.scale_out_actions, s.scale_in_actions,
                            s.refused_changes, time.monotonic() - t0))
            log(f"[{name}] {plan}, {rd.label}: {100 * s.within_slo_share:.2f}% in SLO, {s.instance_hours:,.1f} inst-h "
                f"({rows[-1].sim_s:.1f} s)")
        plans[plan] = {"rows": [asdict(r) for r in rows], "max_move": asdict(max_move(rows))}
    return {
        "trace": tt.spec, "test_seed": tt.test_seed, "train_seeds": [1 + i for i, _ in tt.train],
        "test_hours": tt.test.size / 3600, "test_requests": float(tt.test.sum()),
        "floor_instance_hours": floor.instance_hours, "plans": plans,
    }


def render(report: dict) -> str:
    out = [f"reference measurements, SLO {SLO_MS:g} ms, SLO share {SLO_SHARE}; plans as tuned under the default reading; "
           f"{report['total_s']:.0f} s, load average {report['load_average'][0]:.1f} on {report['cpus']} CPUs"]
    for tr in report["traces"]:
        for plan, body in tr["plans"].items():
            out += [f"\n### {tr['trace']}, {plan} (test day: seed {tr['test_seed']}, {tr['test_hours']:.1f} h, "
                    f"{tr['test_requests']:,.0f} requests; floor {tr['floor_instance_hours']:,.1f} inst-h)\n",
                    "| reading | in SLO | rejected | inst-h | x floor | out | in | refused |",
                    "|---|---|---|---|---|---|---|---|"]
            for r in body["rows"]:
                out.append(f"| {r['reading']} | {100 * r['within_slo_share']:.2f}% | {100 * r['rejected_share']:.3f}% | "
                           f"{r['instance_hours']:,.1f} | {r['x_floor']:.2f} | {r['scale_out_actions']} | "
                           f"{r['scale_in_actions']} | {r['refused_changes']} |")
            m = body["max_move"]
            out.append(f"\nmax move across the documented-unknown readings: {abs(m['slo_share_points']):.2f} points of SLO share "
                       f"({m['slo_share_reading']}: {m['slo_share_points']:+.2f}), {abs(m['instance_hours_pct']):.1f} % "
                       f"instance-hours ({m['instance_hours_reading']}: {m['instance_hours_pct']:+.1f} %); "
                       f"SLO share {100 * SLO_SHARE:g} % kept under {m['keeps_slo_share']} of {m['readings']} readings")
    return "\n".join(out)


def parse_traces(value: str) -> list[str]:
    names = [x.strip() for x in value.split(",") if x.strip()]
    bad = [n for n in names if n not in TRACES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown trace {', '.join(map(repr, bad)) or '(none given)'}; "
                                         f"choose from {', '.join(TRACES)}, comma-separated")
    return names


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of days >= 1")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=parse_traces, default=list(DEFAULT_TRACES),
                    help=f"comma-separated, of {', '.join(TRACES)} (default {','.join(DEFAULT_TRACES)})")
    ap.add_argument("--train-days", type=positive_int, default=2, help="training seeds per trace, as plan_cost.py (default 2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of the tables")
    args = ap.parse_args(argv)

    from speech.errors import SpeechError

    t_all = time.monotonic()
    try:
        q, t, model = reference_model()
        traces = [run_trace(name, q, t, model, args.train_days) for name in args.traces]
    except SpeechError as err:  # e.g. a reference artifact missing or unreadable: nothing printed on stdout
        log(f"{type(err).__name__}: {err}")
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    report = {
        "readings": {r.label: {**asdict(r.readings), "unknown": r.unknown} for r in READINGS},
        "slo_ms": SLO_MS, "slo_share": SLO_SHARE, "traces": traces,
        "total_s": time.monotonic() - t_all, "load_average": list(os.getloadavg()), "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
