"""``python -m bench``: one subcommand per step of the chain.

Exit codes: 0 ok/warn, 1 a stop finding or a failed check, 2 bad input (nothing written),
130 interrupted. Subcommand modules are imported lazily so ``bench plan`` loads neither pulumi
nor boto3.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from speech.errors import SpeechError

EXIT_OK, EXIT_STOP, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# name -> (module, one-line help). Each module defines add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "drift": ("bench.drift_cmd", "read-only: deployed scaling vs stack config and plan; exit 0 = preflight ok"),
    "qmax": ("bench.qmax_cmd", "closed-loop concurrency ladder -> qmax artifact (Q_max, service time, curve)"),
    "ttotal": ("bench.ttotal_cmd", "forced scale-out (or a second local process), phases timestamped -> ttotal artifact"),
    "tcopy": ("bench.tcopy_cmd", "start a second model copy beside a running one, N times -> copy artifact (T_copy, footprint)"),
    "copies": ("bench.copies_cmd", "per-copy qmax + copy artifact -> copy thresholds, packing, managed instance range (no AWS calls)"),
    "capacity": ("bench.capacity_cmd", "more concurrency for a model: copies into spare accelerator memory first, then new instances"),
    "plan": ("bench.plan_cmd", "turn qmax + ttotal artifacts into thresholds, fleet and cooldowns (no AWS calls)"),
    "validate": ("bench.validate_cmd", "deployed policy vs plan, plus live load checks with --live"),
    "observe": ("bench.observe_cmd", "read-only calibration: CloudWatch history vs the deployed plan -> holds | drifted"),
    "thaw": ("bench.thaw_cmd", "restore scaling after an interrupted qmax/ttotal"),
    "simulate": ("bench.simulate_cmd", "a traffic trace against a simulated fleet: every scaling policy side by side"),
    "tune": ("bench.tune_cmd", "search the scaling parameters for the fewest instance-hours that keep the SLO share (simulated)"),
    "replay": ("bench.replay_cmd", "open-loop replay of a traffic trace against a real target (timestamps honoured)"),
    "demo": ("bench.demo", "the whole chain on this machine: container, qmax, ttotal, plan, preview + policy, report"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m bench",
        description="Measure an endpoint (qmax, ttotal), plan its autoscaling (plan) and keep the "
        "deployment equal to the measurements (drift, validate, observe, thaw); `demo` runs the whole chain locally.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_) in COMMANDS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_, description=getattr(mod, "DESCRIPTION", help_),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._module.run(args))
    except SpeechError as err:
        print(f"{err.__class__.__name__}: {err}", file=sys.stderr)
        return getattr(err, "exit_code", EXIT_USAGE)
    except KeyboardInterrupt:
        print("interrupted: nothing half-written was left behind", file=sys.stderr)
        return EXIT_INTERRUPTED
