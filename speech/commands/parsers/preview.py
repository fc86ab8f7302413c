"""``speech-deploy preview``: its description and flags (the command: :mod:`speech.commands.preview`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from speech.cli import stack_name

DESCRIPTION = """\
Run the Pulumi program under Pulumi's mocks against Pulumi.<stack>.yaml, offline (no AWS calls,
no Pulumi service): the resources it would create, each model's autoscaling gate, outputs and
warnings. A ConfigError the program raises is one line and exit 2.

Exit 0 the program ran, 2 bad input (stack file, config, receipts), 130 interrupted.
"""
EPILOG = None


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
