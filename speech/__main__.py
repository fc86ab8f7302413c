"""``python -m speech preview --stack NAME``: the offline preview (see speech.preview)."""

import sys


def _main(argv: list[str]) -> int:
    if not argv or argv[0] != "preview":
        print("usage: python -m speech preview --stack NAME [--stack-dir DIR] [--json]", file=sys.stderr)
        return 2
    from .preview import main

    return main(argv[1:])


sys.exit(_main(sys.argv[1:]))
