"""``speech-deploy preview``: parse, call :func:`speech.infra.preview.run_preview`, render."""

from __future__ import annotations

import argparse
from pathlib import Path

from speech.cli import JsonAwareParser, guarded, parse_or_exit_code, stack_name, wants_json
from speech.infra.preview import load_receipts, render, run_preview
from speech.stack.read import stack_file
from speech.stack.read import stack_name as bare_stack_name

DESCRIPTION = """\
Run the Pulumi program under Pulumi's mocks against Pulumi.<stack>.yaml, offline (no AWS calls,
no Pulumi service): the resources it would create, each model's autoscaling gate, outputs and
warnings. A ConfigError the program raises is one line and exit 2.

Exit 0 the program ran, 2 bad input (stack file, config, receipts), 130 interrupted.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, type=stack_name, metavar="NAME",
                        help="stack name, reads Pulumi.NAME.yaml (NAME, ORG/NAME or ORG/PROJECT/NAME)")
    parser.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                        help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    parser.add_argument("--json", action="store_true", help="print resources, outputs and gates as JSON (errors too)")
    parser.add_argument("--first-preview", action="store_true",
                        help="run as the first preview of a new stack: ids, ARNs, URLs and image digests unknown")
    parser.add_argument("--receipts", metavar="DIR|s3://BUCKET",
                        help="where the measurement receipts are read from offline: a copy of the provenance "
                             "bucket's receipts/ (aws s3 sync s3://BUCKET/receipts/ DIR/receipts/), or s3://BUCKET "
                             "to read it with your AWS credentials; default none (measured figures then have none)")


def run(args: argparse.Namespace) -> int:
    """The preview of ``args.stack``; raises SpeechError for bad input (the caller reports it)."""
    receipts = load_receipts(args.receipts) if args.receipts else None
    result = run_preview(stack_file(args.stack_dir, args.stack), bare_stack_name(args.stack), first_preview=args.first_preview,
                         receipts=receipts)
    print(result.to_json() if args.json else render(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m speech preview`` (also ``speech-deploy preview``)."""
    JsonAwareParser.json_errors = wants_json(argv)
    parser = JsonAwareParser(prog="speech-deploy preview", description=DESCRIPTION,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args, code = parse_or_exit_code(parser, argv)
    return code if args is None else guarded(lambda: run(args), as_json=args.json)
