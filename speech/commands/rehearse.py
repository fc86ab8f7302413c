"""``speech-deploy rehearse``: parse (:mod:`speech.commands.parsers.rehearse`), call
:func:`speech.infra.rehearse.rehearse`, render."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from speech.cli import JsonAwareParser, guarded, parse_or_exit_code, wants_json
from speech.commands.parsers.rehearse import DESCRIPTION, EPILOG, add_arguments
from speech.errors import RehearsalError
from speech.infra.rehearse import rehearse
from speech.stack.read import stack_file
from speech.stack.read import stack_name as bare_stack_name


def run(args: argparse.Namespace) -> int:
    """The rehearsal of ``args.stack``; raises SpeechError for bad input (the caller reports it)."""
    if args.weights_out is not None and args.weights_out.exists():
        raise RehearsalError(f"--weights-out {args.weights_out} exists; give a new directory")
    quiet = args.json or getattr(args, "quiet", False)
    show = (lambda c: None) if quiet else (lambda c: print(f"  [{'ok' if c.ok else 'FAIL':>4}] {c.step:<11} {c.detail}", flush=True))
    result = rehearse(stack_file(args.stack_dir, args.stack), bare_stack_name(args.stack), model=args.model,
                      weights_dir=args.weights_dir, weights_out=args.weights_out, progress=show,
                      cache_dir=args.cache_dir)
    if args.json:
        print(json.dumps({"stack": result.stack, "model": result.model, "ok": result.ok,
                          "failed_step": result.failed.step if result.failed else None,
                          "checks": [asdict(c) for c in result.checks]}, indent=2))
    else:
        failed = result.failed
        # The failed check's detail may have grown after it was shown (the container log's tail).
        print(f"\nFAILED at step {failed.step!r}: {failed.detail}" if failed else "\nOK: SageMaker would start this endpoint")
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m speech rehearse`` (also ``speech-deploy rehearse``)."""
    JsonAwareParser.json_errors = wants_json(argv)
    p = JsonAwareParser(prog="speech-deploy rehearse", description=DESCRIPTION, epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    args, code = parse_or_exit_code(p, argv)
    return code if args is None else guarded(lambda: run(args), as_json=args.json)
