"""``speech-deploy preview``: parse (:mod:`speech.commands.parsers.preview`), call
:func:`speech.infra.preview.run_preview`, render."""

from __future__ import annotations

import argparse

from speech.cli import JsonAwareParser, guarded, parse_or_exit_code, wants_json
from speech.commands.parsers.preview import DESCRIPTION, add_arguments
from speech.infra.preview import load_receipts, render, run_preview
from speech.stack.read import stack_file
from speech.stack.read import stack_name as bare_stack_name


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
