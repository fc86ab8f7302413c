"""``speech-bench`` (``python -m bench``): one subcommand per step of the chain.

Exit codes: 0 ok/warn, 1 a stop finding or a failed check, 2 bad input (nothing written),
130 interrupted. The help and the parse come from :mod:`bench.cli.parsers` alone; the named
command's module (:mod:`bench.commands`, which imports its dependencies at its top) is imported
only once the arguments parse, so ``--help`` loads nothing heavy and ``bench plan`` loads neither
pulumi nor boto3.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from bench.cli import bounds, results
from bench.errors import UsageError
from speech.cli import (  # noqa: F401
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STOP,
    EXIT_USAGE,
    JsonAwareParser,
    add_common,
    add_verbosity,
    configure_logging,
    report_error,
    verbosity,
    wants_json,
)
from speech.errors import SpeechError

# name -> (module in bench/commands/, one-line help). bench/cli/parsers/<name>.py defines DESCRIPTION and
# add_arguments(parser); bench/commands/<name>.py defines run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "drift": ("bench.commands.drift", "read-only: deployed scaling vs stack config and plan; exit 0 = preflight ok"),
    "qmax": ("bench.commands.qmax", "closed-loop concurrency ladder -> qmax artifact (Q_max, service time, curve)"),
    "ttotal": ("bench.commands.ttotal", "forced scale-out (or a second local process), phases timestamped -> ttotal artifact"),
    "tcopy": ("bench.commands.tcopy", "start a second model copy beside a running one, N times -> copy artifact (T_copy, footprint)"),
    "copies": ("bench.commands.copies", "per-copy qmax + copy artifact -> copy thresholds, packing, managed instance range (no AWS calls)"),
    "capacity": ("bench.commands.capacity", "more concurrency for a model: copies into spare accelerator memory first, then new instances"),
    "plan": ("bench.commands.plan", "turn qmax + ttotal artifacts into thresholds, fleet and cooldowns (no AWS calls)"),
    "validate": ("bench.commands.validate", "deployed policy vs plan, plus live load checks with --live"),
    "observe": ("bench.commands.observe", "read-only calibration: CloudWatch history vs the deployed plan -> holds | drifted"),
    "thaw": ("bench.commands.thaw", "restore scaling after an interrupted qmax/ttotal"),
    "simulate": ("bench.commands.simulate", "a traffic trace against a simulated fleet: every scaling policy side by side"),
    "forecast": ("bench.commands.forecast", "request-rate history -> the next day's scheduled floors from a seasonal forecast"),
    "tune": ("bench.commands.tune", "search the scaling parameters for the fewest instance-hours that keep the SLO share (simulated)"),
    "replay": ("bench.commands.replay", "open-loop replay of a traffic trace against a real target (timestamps honoured)"),
    "demo": ("bench.commands.demo",
             "the whole chain on this machine: container, qmax, ttotal, plan, tune, simulate, preview + policy, report"),
}


class _Parser(JsonAwareParser):
    """One line and exit 2 for a usage error (JSON under --json), as for every other bad input."""


PROG = "speech-bench"
DESCRIPTION = """\
Measure an endpoint (qmax, ttotal, tcopy), plan its autoscaling (plan, copies, capacity), try
the plan against traffic (simulate, replay) and keep the deployment equal to the measurements
(drift, validate, observe, thaw); `demo` runs the whole chain on this machine.

Also runs as `python -m bench`. `speech-bench COMMAND --help` explains one command.

Every command: --json prints the result (and any failure, as {"error": {"type", "message",
"exit_code"}}) as JSON on stdout; -q errors only, no progress display; -v/-vv more logging.
Exit 0 ok (or warn), 1 a stop finding or a failed check, 2 bad input (nothing written),
130 interrupted.
"""


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option), if any."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str = "*") -> argparse.ArgumentParser:
    """The parser; only ``command``'s parser module is imported (the others are listed by name), so
    ``--help`` and a command's own parse load nothing they do not use. ``"*"`` (the default)
    declares every command's flags, ``""`` none. No command module is imported here."""
    parser = _Parser(prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_) in COMMANDS.items():
        if command not in (name, "*"):
            sub.add_parser(name, help=help_, add_help=False)
            continue
        parsers = importlib.import_module(f"bench.cli.parsers.{name}")
        p = sub.add_parser(name, help=help_, description=getattr(parsers, "DESCRIPTION", help_),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        parsers.add_arguments(p)
        if name in results.METRICS:
            results.add_result_arguments(p, name, results.METRICS[name])
        _bound_arguments(p)
        add_verbosity(p)
        p.set_defaults(_module=module)
    return parser


def _bound_arguments(p: argparse.ArgumentParser) -> None:
    """Every numeric flag finite and inside its stated range (:data:`bench.cli.bounds.RANGES`), every
    --stack a Pulumi stack name, every command a --json (errors as JSON at least)."""
    for action in p._actions:
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is None:
            continue
        if action.type in (int, float):
            rng = bounds.RANGES.get(flag, bounds.DEFAULT_RANGE)
            action.type = bounds.bounded(action.type, flag, rng)
            if action.help and action.help is not argparse.SUPPRESS:
                action.help = f"{action.help} [{rng.text()}]"
        elif action.dest == "stack" and action.type is None:
            action.type = bounds.stack_name
            if action.help and action.help is not argparse.SUPPRESS:
                action.help += " (NAME, ORG/NAME or ORG/PROJECT/NAME)"
    if not any("--json" in a.option_strings for a in p._actions):
        p.add_argument("--json", action="store_true",
                       help='a failure as one JSON object on stdout ({"error": {...}}); the report itself stays text')


def _preflight(args: argparse.Namespace) -> None:
    """Refuse an output directory that cannot be written before the command writes anything."""
    from pathlib import Path

    dirs = [("--out", getattr(args, "out", None))]
    if getattr(args, "stack", None) and args.command in ("plan", "demo"):
        dirs.append(("--stack-dir", getattr(args, "stack_dir", None)))
    dirs += results.preflight(args)
    for flag, path in dirs:
        if isinstance(path, Path):
            problem = bounds.out_dir_problem(path)
            if problem:
                raise UsageError(f"{flag} {path}: {problem}; pass a directory you can write")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    JsonAwareParser.json_errors = as_json
    parser = build_parser(_command_in(argv) or "")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help/--version (0) or a usage error already printed (2)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    level = verbosity(args)
    args.quiet = level < 0
    configure_logging(level)
    try:
        _preflight(args)
        # The command's module only now: it imports what the run needs at its top (numpy, the plan, an
        # AWS or Kubernetes client), which --help and a refused argument never pay for.
        run = importlib.import_module(args._module).run
        if args.command in results.METRICS:
            return results.run_with_results(args, run, as_json=as_json, argv=argv)
        return int(run(args))
    except KeyboardInterrupt:
        return report_error("Interrupted", "stopped by Ctrl-C; nothing half-written was left behind", EXIT_INTERRUPTED,
                            as_json=as_json)
    except SpeechError as err:
        return report_error(err.__class__.__name__, str(err), getattr(err, "exit_code", EXIT_USAGE), as_json=as_json)
    except Exception as err:
        mapped = external_error(err)
        if mapped is None:
            raise
        return report_error(*mapped, EXIT_USAGE, as_json=as_json)


def external_error(err: BaseException) -> tuple[str, str] | None:
    """(name, message) for a failure outside our code that is the user's to fix (AWS region,
    credentials or permissions; a disk that is full or read-only); None for anything else, which
    is a bug and keeps its traceback."""
    import errno

    mod = type(err).__module__ or ""
    if mod.startswith("botocore"):
        from bench.aws.client import describe_aws_error

        return describe_aws_error(err)
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        where = f" ({err.filename})" if err.filename else ""
        return "OutputError", f"{err.strerror}{where}; free space or pass a directory you can write"
    return None
