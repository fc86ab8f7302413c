"""``python -m speech preview|rehearse --stack NAME`` (see speech.infra.preview, speech.infra.rehearse)."""

import sys

USAGE = (
    "usage: python -m speech preview --stack NAME [--stack-dir DIR] [--json] [--first-preview]\n"
    "       python -m speech rehearse --stack NAME [--stack-dir DIR] [--model NAME] [--weights-dir DIR] [--json]"
)


def _main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("preview", "rehearse"):
        print(USAGE, file=sys.stderr)
        return 2
    if argv[0] == "preview":
        from speech.infra.preview import main
    else:
        from speech.infra.rehearse import main
    return main(argv[1:])


sys.exit(_main(sys.argv[1:]))
