"""``speech-deploy rehearse``: its description and flags (the command: :mod:`speech.commands.rehearse`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from speech.cli import stack_name

DESCRIPTION = """\
What SageMaker will do with the previewed resources, done locally before an account pays for it:
build the weight cache with the stack's own buildspec, mount it read-only, start the container
with the Model's environment, ping, synthesize one sentence, stop, and check that the model
directory is unchanged."""
EPILOG = ("Steps: preview, (checkpoint: torch sources), build, read-only, serve, ping, synthesize, stop, unchanged. "
          "Exit 0 all hold; 1 a step failed (named); 2 bad input; 130 interrupted.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, type=stack_name, metavar="NAME",
                   help="stack name, reads Pulumi.NAME.yaml (NAME, ORG/NAME or ORG/PROJECT/NAME)")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="where Pulumi.NAME.yaml lives (default .)")
    p.add_argument("--model", metavar="NAME", help="model to rehearse when the stack has several")
    p.add_argument("--weights-dir", type=Path, metavar="DIR", help="skip the build: use a directory --weights-out kept")
    p.add_argument("--weights-out", type=Path, metavar="DIR", help="also keep the built model directory in DIR (new)")
    p.add_argument("--cache-dir", type=Path, metavar="DIR",
                   help="keep what the next rehearsal can reuse in DIR (created if missing): the build's virtualenv, "
                        "one per interpreter and pinned wheel set, and the torch stand-in checkpoint; a later "
                        "rehearsal with the same inputs skips making them (delete DIR to start over)")
    p.add_argument("--json", action="store_true", help="print the checks as JSON (errors too)")
