"""Traffic traces from a ``--trace`` spec: the shipped CSV files and the user's read here (the
generators and the CSV parsing are :mod:`speech.sim.traces`, pure). Used by simulate, tune and replay."""

from __future__ import annotations

from pathlib import Path

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
