"""``--threshold``, ``--csv DIR`` and ``--html FILE`` on every command that measures or simulates
(:data:`METRICS` names them and their metrics): declared on the command's parser, checked before
the command runs, and after it, judged and written from the :class:`bench.report.outputs.RunReport`
the command leaves in ``args._report``.

Exit codes: the command's own when it is not 0 (1: a stop finding or failed check, which the
thresholds do not hide); else :data:`bench.cli.thresholds.EXIT_THRESHOLD` when a threshold broke.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.cli.thresholds import EXIT_THRESHOLD, Metric, add_threshold_argument, broken, judge, summary_message
from speech.cli import error_payload

# command -> ((metric, what it is), ...); every key of that command's summary, in order.
METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "qmax": (
        ("q_max", "highest level within the SLO, requests in flight"),
        ("bracketed", "1 when a level failed above Q_max, else 0"),
        ("ttfab_p95_ms_at_qmax", "p95 TTFAB at Q_max"),
        ("throughput_rps_at_qmax", "completions per second at Q_max"),
        ("service_p95_ms", "uncontended p95 TTFAB (concurrency 1)"),
        ("service_mean_ms", "uncontended mean TTFAB"),
        ("levels", "ladder levels measured"),
        ("cloudwatch_ratio", "CloudWatch / client in-flight"),
    ),
    "ttotal": (
        ("t_total_s", "measured scale-out, desired_set to traffic served"),
        ("planning_t_total_s", "measured + the default reaction bound"),
        ("dominant_phase_s", "the longest phase"),
        ("dominant_phase_share", "the longest phase over the measured T_total"),
    ),
    "tcopy": (
        ("t_copy_s", "T_copy to plan with"),
        ("t_copy_p50_s", "median start"),
        ("t_copy_p95_s", "p95 start"),
        ("t_copy_max_s", "slowest start"),
        ("starts", "starts measured"),
        ("accelerator_memory_mib", "one copy's accelerator memory"),
        ("host_memory_mib", "one copy's peak RSS"),
    ),
    "plan": (
        ("stop_findings", "findings at stop"),
        ("warn_findings", "findings at warn"),
        ("q_max", "Q_max planned with"),
        ("c_scale_max", "scale-out target, client in-flight per instance"),
        ("min_instances", "fleet floor"),
        ("max_instances", "fleet cap"),
        ("per_instance_rps", "rate each instance is sized at"),
        ("slo_share_at_peak", "share within the SLO at peak over max_instances"),
        ("refused_share_at_peak", "share refused at peak"),
        ("planning_t_total_s", "planning T_total"),
        ("reach_qmax_probability", "chance an instance at the target reaches Q_max within T_total"),
    ),
    "simulate": (
        ("within_slo_share", "the plan's share answered within the SLO (seed plan beside a tuned one)"),
        ("rejected_share", "the plan's share refused at the gate"),
        ("ttfab_p95_ms", "the plan's p95 TTFAB of answered requests"),
        ("ttfab_p99_ms", "the plan's p99 TTFAB"),
        ("violation_minutes", "minutes under 95% within the SLO"),
        ("instance_hours", "the plan's instance-hours"),
        ("cost_vs_floor", "instance-hours over the floor's"),
        ("flaps", "scale-in then scale-out within T_total"),
        ("peak_instances", "most instances in service"),
        ("tuned_within_slo_share", "the tuned plan's share within the SLO (with --tuned-plan)"),
        ("tuned_instance_hours", "the tuned plan's instance-hours (with --tuned-plan)"),
    ),
    "tune": (
        ("within_slo_share", "the tuned plan's mean share within the SLO on the training days"),
        ("within_slo_share_worst_day", "its worst training day"),
        ("rejected_share", "its refused share"),
        ("instance_hours", "its instance-hours"),
        ("cost_vs_floor", "its instance-hours over the floor's"),
        ("instance_hours_vs_seed", "tuned over seed instance-hours"),
        ("checks_failed", "held-out and perturbed days where it misses the share"),
    ),
    "replay": (
        ("within_slo_share", "share answered within --slo-ms (rejected and failed requests count as missed)"),
        ("rejected_share", "share refused by the gate (503)"),
        ("error_share", "share failed otherwise"),
        ("ttfab_p50_ms", "p50 TTFAB of answered requests"),
        ("ttfab_p95_ms", "p95 TTFAB"),
        ("ttfab_p99_ms", "p99 TTFAB"),
        ("requests", "requests sent"),
        ("send_late_p99_ms", "how late the client sent (its own lag)"),
    ),
    "validate": (
        ("issues", "differences and failed live checks"),
        ("policy_issues", "deployed policy vs the plan"),
        ("live_issues", "failed live checks"),
        ("live_p95_ms", "p95 TTFAB at 0.8 x C_scale_max (with --live)"),
        ("gate_rejected", "requests the gate refused past Q_max (with --live)"),
    ),
    "observe": (
        ("findings_not_ok", "calibration findings at warn or stop"),
        ("rejected_share", "share the gate refused in the window"),
        ("occupancy_levels_drifted", "occupancy levels whose p95 exceeds the ladder's"),
        ("flaps", "scale-in then scale-out within T_total"),
        ("cooldown_violations", "scaling actions inside a cooldown"),
    ),
}


def add_result_arguments(p: argparse.ArgumentParser, command: str, metrics: Sequence[tuple[str, str]]) -> None:
    add_threshold_argument(p, [Metric(n, h) for n, h in metrics])
    g = p.add_argument_group("results for CI (docs/cli.md: thresholds, CSV columns)")
    g.add_argument("--csv", type=Path, metavar="DIR",
                   help=f"also write the run's rows as CSV into DIR: {command}-summary.csv (metric,value) and one "
                        f"{command}-<table>.csv per table, a header row first")
    g.add_argument("--html", type=Path, metavar="FILE",
                   help="also write one self-contained HTML report (plots embedded: it opens offline)")


def preflight(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The --csv directory and the --html file's directory, to check like --out before anything runs."""
    out = []
    if getattr(args, "csv", None) is not None:
        out.append(("--csv", args.csv))
    html = getattr(args, "html", None)
    if html is not None:
        if html.exists() and html.is_dir():
            from bench.errors import UsageError

            raise UsageError(f"--html {html}: is a directory; pass a file name, e.g. {html / 'report.html'}")
        out.append(("--html", html.parent if str(html.parent) else Path(".")))
    return out


def run_with_results(args: argparse.Namespace, run: Callable[[argparse.Namespace], int], *, as_json: bool,
                     argv: Sequence[str]) -> int:
    thresholds = list(getattr(args, "threshold", None) or [])
    capture = as_json and bool(thresholds)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf) if capture else contextlib.nullcontext():
        rc = int(run(args))
    report = getattr(args, "_report", None)
    wants = thresholds or getattr(args, "csv", None) is not None or getattr(args, "html", None) is not None
    verdicts = judge(thresholds, report.summary) if report is not None and thresholds else []
    written: list[Path] = []
    if report is not None:
        if getattr(args, "csv", None) is not None:
            from bench.report.outputs import write_csv

            written += write_csv(args.csv, report)
        if getattr(args, "html", None) is not None:
            from bench.report.outputs import write_html

            written.append(write_html(args.html, report, verdicts, argv))
    elif wants and rc == 0:
        print("nothing to judge or write: this run measured nothing (a --dry-run); --threshold, --csv and --html "
              "were not applied", file=sys.stderr)
    bad = broken(verdicts)
    final = rc if rc != 0 else (EXIT_THRESHOLD if bad else 0)
    quiet = getattr(args, "quiet", False)
    if capture:
        text = buf.getvalue()
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            doc = {"output": doc if doc is not None else text}
        doc["thresholds"] = [v.as_json() for v in verdicts]
        if bad and final == EXIT_THRESHOLD:
            doc["error"] = error_payload("ThresholdBroken", summary_message(verdicts), final)["error"]
        print(json.dumps(doc, indent=2))
    else:
        if verdicts and not as_json and not quiet:
            print("\nthresholds:")
            for v in verdicts:
                print(f"  {v.line()}")
        if written and not as_json and not quiet:
            print("wrote " + ", ".join(str(p) for p in written))
        if bad and final == EXIT_THRESHOLD and not as_json:
            print(f"ThresholdBroken: {summary_message(verdicts)}", file=sys.stderr)
    sys.stdout.flush()
    return final
