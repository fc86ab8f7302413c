"""What every entry point shares: ``--version``, ``-q``/``-v``, and one way to report a failure.

The four commands (``speech-bench``, ``speech-deploy``, ``speech-policy``, ``speech-container``;
``python -m bench|speech|policy|container`` stay as aliases) end the same way:

* exit 0 ok (or warn), 1 a stop finding or a failed check, 2 bad input (nothing written),
  130 interrupted;
* a failure is one line ``Name: message`` on stderr, or with ``--json`` one object on stdout:
  ``{"error": {"type": Name, "message": ..., "exit_code": N}}``.

Only the standard library is imported here, so ``--help`` and ``--version`` answer before any
heavy import.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from speech.errors import ConfigError
from speech.stack import names

EXIT_OK, EXIT_STOP, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DIST = "speech-endpoints"


def version() -> str:
    """The installed distribution's version, ``0+unknown`` in a checkout that was never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(DIST)
    except PackageNotFoundError:
        return "0+unknown"


def wants_json(argv: Sequence[str] | None) -> bool:
    """True when ``--json`` is among the arguments (before ``--``): errors then go out as JSON,
    even those argparse finds before it has parsed anything."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        args = args[: args.index("--")]
    return "--json" in args


def error_payload(name: str, message: str, exit_code: int) -> dict:
    return {"error": {"type": name, "message": message, "exit_code": exit_code}}


def report_error(name: str, message: str, exit_code: int, *, as_json: bool) -> int:
    """Print one failure the documented way and return its exit code."""
    if as_json:
        print(json.dumps(error_payload(name, message, exit_code)), flush=True)
    else:
        print(f"{name}: {message}", file=sys.stderr, flush=True)
    return exit_code


class JsonAwareParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, as JSON under ``--json``."""

    json_errors = False
    """Set by the entry point from :func:`wants_json` before parsing."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "argument --x: --x 5: outside ..." (a bounded type's message names the flag itself) -> "--x 5: outside ..."
        head, sep, rest = message.partition(": ")
        if sep and head.startswith("argument ") and rest.startswith(head.removeprefix("argument ").split("/")[0] + " "):
            message = rest
        if JsonAwareParser.json_errors:
            report_error("UsageError", f"{self.prog}: {message}", EXIT_USAGE, as_json=True)
            self.exit(EXIT_USAGE)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


class _VersionAction(argparse.Action):
    """argparse's ``version`` action, looking the version up only when ``--version`` is given: the
    lookup reads the installed distributions' metadata, which every --help would otherwise pay for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(f"{parser.prog} {version()}\n", sys.stdout)
        parser.exit()


def add_common(parser: argparse.ArgumentParser, *, prog_version: bool = True) -> None:
    """``--version`` (on the top parser only), ``-q``/``--quiet`` and ``-v``/``--verbose``."""
    if prog_version:
        parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    add_verbosity(parser)


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    g = parser.add_mutually_exclusive_group()
    # SUPPRESS: a flag given before the subcommand is not reset by the subcommand's default.
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="errors only: no progress display, no info logging")
    g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="more logging (-v info, -vv debug, botocore's included)")


def verbosity(args: argparse.Namespace) -> int:
    """-1 quiet, 0 default, 1 -v, 2 -vv."""
    if getattr(args, "quiet", False):
        return -1
    return int(getattr(args, "verbose", 0) or 0)


def guarded(call, *, as_json: bool) -> int:
    """Run ``call()`` (a command's body, returning its exit code) and report what it raises the
    documented way: a :class:`speech.errors.SpeechError` as one line (or JSON) with its exit code,
    Ctrl-C as exit 130. Anything else is a bug and keeps its traceback."""
    from speech.errors import SpeechError

    try:
        return int(call())
    except KeyboardInterrupt:
        return report_error("Interrupted", "stopped by Ctrl-C; nothing half-written was left behind", EXIT_INTERRUPTED,
                            as_json=as_json)
    except SpeechError as err:
        return report_error(err.__class__.__name__, str(err), getattr(err, "exit_code", EXIT_USAGE), as_json=as_json)


def parse_or_exit_code(parser: argparse.ArgumentParser, argv: Sequence[str] | None):
    """``(args, None)``, or ``(None, exit code)`` when argparse answered (--help, --version: 0) or
    refused (2, already printed)."""
    try:
        return parser.parse_args(argv), None
    except SystemExit as exit_:
        return None, exit_.code if isinstance(exit_.code, int) else EXIT_USAGE


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (a test's capture, a redirected stream)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr)
        except Exception:  # logging must never take the command down
            self.handleError(record)


def configure_logging(level: int) -> None:
    """Logging on stderr: warnings by default, errors with -q, info with -v, debug with -vv.
    Third-party loggers (botocore, urllib3, httpx) stay at warning unless -vv. One handler of ours
    on the root logger, added once (a process that calls main() again, a test, keeps one)."""
    root_level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(level, logging.DEBUG)
    root = logging.getLogger()
    root.setLevel(root_level)
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    for noisy in ("botocore", "boto3", "urllib3", "httpx", "httpcore", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if level >= 2 else max(root_level, logging.WARNING))


def stack_name(text: str) -> str:
    """``--stack``'s type: the one stack-name rule (:func:`speech.stack.names.stack_name`), its
    refusal as argparse's usage error."""
    try:
        return names.stack_name(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
