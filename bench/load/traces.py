"""Traffic traces from a ``--trace`` spec: the shipped CSV files and the user's read here (the
generators and the CSV parsing are :mod:`speech.sim.traces`, pure). Used by simulate, tune and replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.errors import UsageError
from speech.sim.traces import ATTRIBUTION, BUILTIN_TRACES, MAX_TRACE_BYTES, Trace, TraceError, from_csv_text, generate, parse_spec

ROOT = Path(__file__).resolve().parents[2]
TRACE_DIR = ROOT / "data" / "traces"


def load_trace(spec: str, seed: int | None = None) -> Trace:
    """A trace from its spec: generators in memory, CSV files (and the shipped ones) read here."""
    kind, path, opts = parse_spec(spec)
    if kind in BUILTIN_TRACES or kind == "csv":
        file = TRACE_DIR / BUILTIN_TRACES[kind] if kind in BUILTIN_TRACES else Path(path or "")
        try:
            if file.stat().st_size > MAX_TRACE_BYTES:
                raise TraceError(f"--trace {spec!r}: {file} is {file.stat().st_size:,} bytes, more than a trace may "
                                 f"hold ({MAX_TRACE_BYTES // 2**20} MiB)")
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise TraceError(f"--trace {spec!r}: no such file {file}; check the path") from None
        except (OSError, UnicodeDecodeError) as err:
            raise TraceError(f"--trace {spec!r}: cannot read {file} ({err.__class__.__name__}); pass a CSV text file") from None
        attribution = ATTRIBUTION if kind in BUILTIN_TRACES else None
        return from_csv_text(text, name=kind if kind in BUILTIN_TRACES else file.stem, spec=spec, opts=opts,
                             attribution=attribution)
    if seed is not None and "seed=" not in spec:
        spec = f"{spec}{',' if ':' in spec else ':'}seed={seed}"
    return generate(spec)


def load_history(spec: str, end: str | None = None) -> tuple[datetime, np.ndarray]:
    """A request-rate history (bench forecast, bench tune --forecast-history): (when it ends, UTC; its
    arrivals per second). ``cloudwatch:PATH``: a per-minute Invocations export (speech.plan.history),
    its own timestamps; else a trace spec, ending at ``end`` (ISO 8601; None: now, to the minute).
    Bad input is a UsageError naming the flag's value."""
    from speech.errors import PlanInputError

    if spec.startswith("cloudwatch:"):
        from speech.plan.history import invocations_per_second

        path = Path(spec.split(":", 1)[1])
        try:
            if path.stat().st_size > MAX_TRACE_BYTES:
                raise UsageError(f"--history {spec!r}: {path} is more than a history may hold ({MAX_TRACE_BYTES // 2**20} MiB)")
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"--history {spec!r}: no such file {path}") from None
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"--history {spec!r}: cannot read {path} ({err.__class__.__name__})") from None
        try:
            start, arrivals = invocations_per_second(text)
        except PlanInputError as err:
            raise UsageError(f"--history {spec!r}: {err}") from None
        return start + timedelta(seconds=int(arrivals.size)), arrivals
    try:
        arrivals = np.asarray(load_trace(spec).arrivals, dtype=float)
    except TraceError as err:
        raise UsageError(f"--history: {err}") from None
    if end is None:
        when = datetime.now(UTC).replace(second=0, microsecond=0)
    else:
        try:
            when = datetime.fromisoformat(end.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--history-end {end!r}: not an ISO 8601 time (e.g. 2026-12-03T00:00:00Z)") from None
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when, arrivals
