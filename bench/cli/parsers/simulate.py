"""``bench simulate``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from speech.sim.names import ATTRIBUTION, BUILTIN_TRACES, DEFAULT_SLO_SHARE, POLICY_NAMES

DESCRIPTION = f"""\
Replay a traffic trace against a simulated fleet of the measured instance and compare scaling
policies on the same traffic: share answered within the SLO, share rejected at the gate, TTFAB
p95/p99, minutes in violation, instance-hours and cost (as a ratio to the floor), scaling
actions, changes refused while the endpoint was Updating, flaps and peak instances.

floor: the fewest instance-hours that keep --slo-share of the WHOLE trace's requests within the
SLO, clairvoyant, no start-up, at most one change a minute, on the simulator's instance model at
each minute's mean rate (a Lagrangian over minutes); its schedule is then run like any policy.
perfect-forecast: clairvoyant under the plan's mechanics (capacity asked for a start-up ahead, one
endpoint update at a time, the plan's floor and cap). Under the table: plan -> perfect-forecast
(what a forecast could still win) and perfect-forecast -> floor (what the platform's mechanics
cost). target-floor is ceil(arrivals / X(C_scale_max)) every second (the cost at the plan's
utilization, not SLO-meeting). hpa-v2 and keda: the plan as a Kubernetes HorizontalPodAutoscaler on
the pods' in-flight requests (target C_scale_max, the plan's floor, cap and scale-in as scaleDown) and
as a KEDA ScaledObject (an External metric), as the controller acts: a 15 s sync, 10 % tolerance,
pods still starting counted as 0 on scale-up, stabilization windows, behavior policies, no one change
at a time (speech.sim.hpa).

The instance is the measurement: throughput and TTFAB vs occupancy from the qmax ladder, the gate
at Q_max, new instances in service after the ttotal artifact's measured phases. Scaling numbers
come from the plan (--plan FILE, or planned here from --peak-rps etc.; without --peak-rps the
trace's busiest minute and quietest minute are the peak and trough).

Traces (--trace):
  diurnal:peak=5000[,trough=250,hours=24,spikes=3,spike_factor=1.2,spike_s=300,seed=1]
  steady:rps=50[,duration=3600]     step:base=50[,factor=3,at=600,duration=1800]
  csv:PATH[,peak=N][,speedup=X|duration=S][,size=COLUMN][,scale=superpose|multiply][,shift=S][,seed=N]
      (one row per request, timestamp first; peak=N scales by superposing independent copies shifted
      within +-shift s (default 300), or with scale=multiply by multiplying counts: bursts as clumps)
  {' / '.join(BUILTIN_TRACES)}[:peak=N,...]   ({ATTRIBUTION})

Policies (--policies, default all): {', '.join(POLICY_NAMES)}.

Hot loading (--hot-load COPY_FILE from bench tcopy): the plan's scaling on copies, once adding
instances only and once placing copies into spare memory first (speech.plan.capacity's best fit),
side by side: SLO share, rejected share, instance-hours, and how soon the first added copy served.

A tuned plan (--tuned-plan FILE, the plan-<model>-tuned.json bench tune wrote from the same qmax
and ttotal artifacts, at the seed's SLO) runs on the same trace beside the seed (--plan, or the plan
made from the flags): the rows read "seed plan" and "tuned plan", and the lines under the table
give the tuned plan's promise (its simulated SLO share) next to what this trace got.

  python -m bench simulate --qmax Q.json --ttotal T.json --peak-rps 5000 --trace diurnal:peak=5000
  python -m bench simulate --qmax Q.json --ttotal T.json --plan plan.json --trace azure-conv:peak=500 --plot
  python -m bench simulate --qmax Q.json --ttotal T.json --plan plan.json --tuned-plan plan-kokoro-82m-tuned.json \\
      --trace diurnal:peak=20,hours=1

Writes simulation-<model>-<trace>.json (+ PNGs with --plot) into --out. Exit 0 ok, 2 bad input.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact (bench qmax)")
    p.add_argument("--ttotal", required=True, type=Path, metavar="FILE", help="ttotal artifact (bench ttotal)")
    p.add_argument("--plan", type=Path, metavar="FILE", help="plan artifact (bench plan); else planned from the flags below")
    p.add_argument("--tuned-plan", type=Path, metavar="FILE",
                   help="tuned plan artifact (bench tune's plan-<model>-tuned.json, from the same --qmax/--ttotal, at the "
                        "seed's SLO): simulated beside the seed (--plan or the flags); rows 'seed plan' and 'tuned plan'")
    p.add_argument("--peak-rps", type=float, default=None, metavar="N", help="plan input (default: the trace's busiest minute)")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N", help="plan input (default: the trace's quietest minute)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="plan input (default: the ladder's SLO)")
    p.add_argument("--surge-ratio", type=float, default=1.25, metavar="X", help="plan input (default 1.25)")
    p.add_argument("--min-instances", type=int, default=1, metavar="N", help="plan input (default 1)")
    p.add_argument("--qmax-derate", type=float, default=1.0, metavar="X", help="plan input: floor(Q_max x X), 0 < X <= 1 (default 1)")
    p.add_argument("--trace", required=True, metavar="SPEC", help="traffic: a generator, a CSV or a shipped trace (see above)")
    p.add_argument("--seed", type=int, default=None, metavar="N", help="seed for generated traces (default: the spec's, else 1)")
    p.add_argument("--history", default=None, metavar="SPEC",
                   help="request-rate history before the trace (a trace spec, or cloudwatch:PATH as for bench forecast), "
                        "what the predictive policy forecasts from besides the trace so far (default: none; under a day of "
                        "data predictive is the reactive plan)")
    p.add_argument("--policies", "--policy", dest="policies", default=",".join(POLICY_NAMES), metavar="A,B,...",
                   help="policies to run (default all; --policy is the same flag)")
    p.add_argument("--slo-share", type=float, default=DEFAULT_SLO_SHARE, metavar="X",
                   help=f"share of the trace's requests the floor keeps within the SLO (default {DEFAULT_SLO_SHARE})")
    p.add_argument("--price-per-hour", type=float, default=None, metavar="USD", help="instance price, for costs in USD")
    p.add_argument("--out", type=Path, default=Path("out/simulate"), metavar="DIR", help="artifact directory (default out/simulate)")
    p.add_argument("--plot", action="store_true", help="also write one timeline of every policy overlaid and a cost-vs-SLO scatter (PNG)")
    p.add_argument("--json", action="store_true", help="print the simulation artifact as JSON instead of the table")
    g = p.add_argument_group("hot loading (copies before instances)")
    g.add_argument("--hot-load", type=Path, metavar="COPY_FILE",
                   help="copy artifact (bench tcopy): also run the plan's scaling on copies of the qmax ladder's server, "
                        "once with every added copy on a new instance (instance-only) and once with copies placed into spare "
                        "memory first, serving after the artifact's T_copy (hot-load), and print both side by side")
    g.add_argument("--hot-load-instance-type", metavar="TYPE",
                   help="instance type the copies are packed into (default: the plan's; speech.plan.copies.packing decides how "
                        "many fit: whole GPUs per copy, host memory, CPU cores when measured)")
    g.add_argument("--headroom-copies", type=int, default=0, metavar="N",
                   help="hot-load: keep N copies' worth of spare memory on running or starting instances, starting empty "
                        "instances when a scale-out leaves less (default 0: instances only when copies do not fit, which "
                        "packs the fleet full and leaves the next spike to wait for new instances)")
    g.add_argument("--copies-fit", type=int, metavar="N",
                   help="override: copies one instance holds (a what-if: MIG partitions, a bigger instance)")
