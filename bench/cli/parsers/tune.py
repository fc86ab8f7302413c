"""``bench tune``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.parallel import add_jobs_argument
from speech.sim.names import DEFAULT_SLO_SHARE, PROMISE_MISS_CHANCE, PROMISE_UNSEEN_DRAWS

DEFAULT_DRAWS = 5
"""Independent draws of the traffic every candidate is judged on: one draw is not the traffic (the
next draw of the same users can land below the share a plan tuned on one kept)."""


DESCRIPTION = f"""\
Search the scaling parameters for the fewest instance-hours that keep --slo-share of the requests
within the SLO, on simulated days of --trace (the bench simulate instance model and AWS mechanics).

Knobs, all plan inputs, each inside the safety bound bench plan checks: the surge ratio, the target
as a share of Q_max (at most 1 - h), the scale-out alarm's datapoints, the floor, and the scale-in:
the share of the fleet per step (at most 1 - C_scale_min / C_scale_max, so the smaller fleet stays
under the target), its window and its cooldown (at least the window and the planning T_total). The
seed formulas (bench plan) are where the search starts; each tuned value is printed next to its
seed with the reason. Scheduled floors and the scale-out cooldown stay as given.

Judges every candidate on --draws independent draws of the traffic (generator seeds, or
superposition seeds of a file trace) and keeps the cheapest whose share BOUND for draws it has not
seen keeps --slo-share: min(lowest share, mean - t * sd * sqrt(1 + 1/n)) over the n draws, t the
Student-t quantile that leaves at most a {PROMISE_MISS_CHANCE:.0%} chance that any of
{PROMISE_UNSEEN_DRAWS} further draws falls below it (one draw: its share; sd: the draws' own, or,
when that is implausibly small, the spread their 24 blocks show). From a seed that misses, the
cheapest one-knob move that keeps it; where no single knob helps, pairs of two. Checks the winner on
--holdout-days other draws, on the first draw with its spikes raised by the surge ratio, and
shifted by an hour. Writes the tuned plan (plan-<model>-tuned.json: the tuned plan inputs, their
reasons and the promise in inputs.promise: simulated SLO share and instance-hours as the mean over
the draws with their lowest and highest (slo_share_low/high, instance_hours_low/high), the share
bound (slo_share_bound), rejected share, cost vs the floor, the trace's sha256, seed, simulator
version) and
tune-<model>-<trace>.json (every knob seed vs tuned, the checks). Exit 0 when the tuned plan keeps the
share on every check, 1 when a check missed it, 2 bad input (nothing written).

Kubernetes (--platform kubernetes, --autoscaler hpa|keda): the plan as speech.deploy.kubernetes
renders it is the seed HPA; the search moves the HPA's own knobs (the target as a share of Q_max,
the scale-down window and policy, minReplicas, with keda daily floors learned from the training draws) with
the same rule and bound, simulated as the HPA controller acts (bench simulate's hpa-v2/keda), and
writes <autoscaler>-<model>-<trace>.json with the tuned spec as autoscaling/v2 fields.

  python -m bench tune --qmax Q.json --ttotal T.json --trace diurnal:peak=5000
  python -m bench tune --platform kubernetes --qmax Q.json --ttotal T.json --trace diurnal:peak=5000
  python -m bench tune --qmax Q.json --ttotal T.json --trace azure-conv:peak=500 --slo-share 0.995 --json

Default --slo-share {DEFAULT_SLO_SHARE}.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact (bench qmax)")
    p.add_argument("--ttotal", required=True, type=Path, metavar="FILE", help="ttotal artifact (bench ttotal)")
    p.add_argument("--trace", required=True, metavar="SPEC", help="traffic, as for bench simulate (a generator or a CSV)")
    p.add_argument("--slo-share", type=float, default=DEFAULT_SLO_SHARE, metavar="X",
                   help=f"share of requests to answer within the SLO on every training day (default {DEFAULT_SLO_SHARE})")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="SLO (default: the ladder's)")
    p.add_argument("--peak-rps", type=float, default=None, metavar="N", help="plan input (default: the trace's busiest minute)")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N",
                   help="plan input (default: the first training day's quietest minute)")
    p.add_argument("--surge-ratio", type=float, default=1.25, metavar="X", help="the seed's surge ratio (default 1.25)")
    p.add_argument("--draws", "--train-days", dest="draws", type=int, default=DEFAULT_DRAWS, metavar="N",
                   help=f"independent draws of the traffic (generator seeds, or superposition seeds of a file trace) every "
                        f"candidate is judged on; the cheapest whose share bound for unseen draws (from the draws' mean and "
                        f"spread, at most their lowest) keeps --slo-share wins, and the promise records the mean, lowest, "
                        f"highest and the bound (default {DEFAULT_DRAWS}; --train-days is the old name)"),
    p.add_argument("--holdout-days", type=int, default=2, metavar="N", help="days the winner is checked on (default 2)")
    p.add_argument("--seed", type=int, default=1, metavar="N", help="first training day's seed (default 1)")
    p.add_argument("--forecast-history", default=None, metavar="SPEC",
                   help="request-rate history before the days tuned on (a trace spec, or cloudwatch:PATH as for bench "
                        "forecast), at least three whole days ending at 00:00: forecast floors from it become one more knob "
                        "(off, or sized for the forecast's 0.5, 0.75 or 0.9 quantile; under the surge on the Average also 0.1 or 0.25)")
    p.add_argument("--out", type=Path, default=Path("out/tune"), metavar="DIR", help="artifact directory (default out/tune)")
    p.add_argument("--json", action="store_true", help="print the tune artifact as JSON instead of the table")
    p.add_argument("--no-progress", action="store_true", help="no progress display (it goes to stderr; -q and --json also turn it off)")
    p.add_argument("--platform", choices=("sagemaker", "kubernetes"), default="sagemaker",
                   help="whose knobs to tune: sagemaker (the plan inputs, default) or kubernetes (the plan rendered as an "
                        "HPA: target, scale-down window and policy, minReplicas, with keda scheduled floors; writes "
                        "hpa-<model>-<trace>.json)")
    p.add_argument("--autoscaler", choices=("hpa", "keda"), default="hpa",
                   help="with --platform kubernetes: an autoscaling/v2 HPA on the Pods metric (default) or a KEDA "
                        "ScaledObject (an External metric)")
    add_jobs_argument(p, "the simulated days")
