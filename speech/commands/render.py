"""``speech-deploy render``: parse (:mod:`speech.commands.parsers.render`), call
:func:`speech.stack.render.render_stack_file`, render what was written."""

from __future__ import annotations

import argparse
import json

from speech.stack.render import render_stack_file, summary, text


def run(args: argparse.Namespace) -> int:
    """Write ``args.stack``'s Kubernetes manifests to ``args.out``; raises SpeechError for bad input
    (the caller reports it; nothing written)."""
    rendered = render_stack_file(args.stack_dir, args.stack, args.out)
    print(json.dumps(summary(rendered), indent=2) if args.json else text(rendered))
    return 0
