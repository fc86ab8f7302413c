"""``speech-deploy`` (``python -m speech``): the Pulumi program offline.

  speech-deploy preview --stack NAME    the program under Pulumi's mocks: resources, gates, outputs
  speech-deploy rehearse --stack NAME   what SageMaker will do with them, done locally first
  speech-deploy render --stack NAME --out DIR   Kubernetes models as plain YAML manifests

Each subcommand's --help explains it. Exit 0 ok, 1 a failed step (rehearse), 2 bad input,
130 interrupted; --json prints the result, and any failure as {"error": {...}}, on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from speech.cli import (
    EXIT_USAGE,
    JsonAwareParser,
    add_common,
    add_verbosity,
    configure_logging,
    guarded,
    parse_or_exit_code,
    verbosity,
    wants_json,
)

COMMANDS = {
    "preview": ("speech.commands.preview", "run the Pulumi program under mocks against Pulumi.NAME.yaml (no AWS calls)"),
    "rehearse": ("speech.commands.rehearse", "build the weight cache and start the container as SageMaker would, locally"),
    "render": ("speech.commands.render", "write a stack's Kubernetes models as plain YAML manifests (kubectl, Argo CD, Flux)"),
}
"""name -> (the command's module, one-line help). ``speech/commands/parsers/<name>.py`` holds its
DESCRIPTION, EPILOG and add_arguments(parser); the command's module defines run(args) -> int."""


def build_parser(command: str = "") -> argparse.ArgumentParser:
    """Only ``command``'s parser module is imported (the others are listed by name), and no command
    module: --help, --version and a refused argument answer before the stack reader or Pulumi load."""
    parser = JsonAwareParser(prog="speech-deploy", description=__doc__.split("\n\n", 1)[1].strip(),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=JsonAwareParser)
    for name, (module, help_) in COMMANDS.items():
        if name != command:
            sub.add_parser(name, help=help_, add_help=False)
            continue
        parsers = importlib.import_module(f"speech.commands.parsers.{name}")
        p = sub.add_parser(name, help=help_, formatter_class=argparse.RawDescriptionHelpFormatter,
                           description=parsers.DESCRIPTION, epilog=parsers.EPILOG)
        parsers.add_arguments(p)
        add_verbosity(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    JsonAwareParser.json_errors = as_json = wants_json(argv)
    command = next((w for w in argv if not w.startswith("-")), "")
    parser = build_parser(command if command in COMMANDS else "")
    args, code = parse_or_exit_code(parser, argv)
    if args is None:
        return code
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    level = verbosity(args)
    args.quiet = level < 0
    configure_logging(level)
    # The command's module only now: it imports the stack reader, pydantic and Pulumi at its top.
    return guarded(lambda: importlib.import_module(args._module).run(args), as_json=as_json)


if __name__ == "__main__":
    sys.exit(main())
