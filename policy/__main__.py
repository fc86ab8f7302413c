"""``speech-policy`` (``python -m policy``): the CrossGuard pack, served or checked offline.

  speech-policy check --stack NAME   the pack against the program, offline (see check --help)
  speech-policy serve                serve the pack to a Pulumi engine (prints its gRPC port)

``pulumi preview --policy-pack policy`` starts this file without arguments: that serves the pack,
as before. ``--help`` and ``--version`` answer and exit, in every form.
"""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started by Pulumi as a script: make the `policy` package importable from the repo root.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

USAGE = """\
usage: speech-policy [-h] [--version] {check,serve} ...

The speech-endpoints CrossGuard pack: blocks SageMaker autoscaling that did not come from a
measured, feasible plan (recomputed from the provenance document), plus cost ceiling and
security hygiene. Also runs as `python -m policy`.

commands:
  check     the pack against the program under Pulumi's mocks, offline (no AWS calls);
            `speech-policy check --help` explains it. Exit 0 no mandatory violation,
            1 at least one, 2 bad input, 130 interrupted
  serve     serve the pack to a Pulumi engine over gRPC (what `pulumi preview --policy-pack
            policy` starts; it prints the port and runs until the engine stops it)

options:
  -h, --help  show this help message and exit
  --version   print the version and exit
"""


def serve() -> int:
    from pulumi_policy import EnforcementLevel, PolicyPack

    from policy.policies import PACK_NAME, POLICIES

    # Serves until the engine stops it (pulumi_policy prints the port on stdout).
    PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
    return 0


def main(argv: list[str] | None = None, *, serve_by_default: bool = False) -> int:
    """``check ...``, ``serve``, ``--help``, ``--version``. Without arguments: serve the pack when
    started as the pack (``serve_by_default``, the engine's way), else print the usage, exit 2."""
    from speech.cli import version

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:
        from policy.check import main as check

        return check(argv[1:])
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    if argv[:1] == ["--version"]:
        print(f"speech-policy {version()}")
        return 0
    if argv[:1] == ["serve"] or (serve_by_default and not argv):
        return serve()
    if serve_by_default and not argv[0].startswith("-") and argv[0] not in ("check", "serve"):
        return serve()  # the engine may pass its own arguments to a pack
    print(USAGE, end="", file=sys.stderr)
    if argv:
        print(f"speech-policy: error: unknown command or option {argv[0]!r} (see --help)", file=sys.stderr)
    return 2


def cli() -> int:
    """The ``speech-policy`` console script: no argument prints the usage (exit 2) rather than serving."""
    return main(None, serve_by_default=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], serve_by_default=True))
