"""The common tail of a measuring command: write the artifact atomically, plot it, print it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from speech.files import write_artifact

A = TypeVar("A", bound=BaseModel)


def publish(
    args: argparse.Namespace,
    artifact: A,
    filename: str,
    render: Callable[[A], str],
    plot: Callable[[A, Path], Path],
) -> Path:
    """Write ``artifact`` into ``args.out``; with ``args.plot`` a PNG beside it; print JSON or the report."""
    out = write_artifact(args.out / filename, artifact)
    from bench.report.runs import report_of

    args._report = report_of(artifact)  # --threshold, --csv and --html (bench.cli.results) read it
    plot_path: Path | None = plot(artifact, out.with_suffix(".png")) if args.plot else None
    if args.json:
        print(artifact.model_dump_json(indent=2))
    else:
        print(render(artifact))
        print(f"\nwrote {out}" + (f" and {plot_path}" if plot_path else ""))
    return out
