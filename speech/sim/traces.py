"""Traffic traces for the fleet simulator: arrivals per second, from a CSV or a seeded generator.

Pure: CSV text comes in as a string (the edges read files, :mod:`speech.files`), generators take a
seed, nothing reads the clock. A trace is an array of expected arrivals per 1 s step (floats, so a
rate-scaled trace keeps its shape) plus, for replay, a way to draw request timestamps.

Spec grammar (``--trace``): ``KIND[:key=value,...]``

* ``diurnal:peak=5000[,trough=250,hours=24,spikes=3,spike_factor=1.2,spike_s=300,seed=1]``:
  a tide ``trough + (peak - trough) * (1 - cos(2 pi t / T)) / 2`` over T = hours (trough at the
  start and end, peak in the middle) with ``spikes`` trapezoid surges (60 s ramp up, ``spike_s``
  hold, 60 s ramp down) that multiply the tide by ``spike_factor`` at seeded random times in the
  middle 80 % of the day; then rescaled above the trough so the highest rate is exactly ``peak``.
  Per-second arrivals are Poisson draws from that rate (seeded).
* ``steady:rps=N[,duration=3600,seed=1]``: Poisson arrivals at a constant rate.
* ``step:base=N[,factor=3,at=600,duration=1800,seed=1]``: ``base`` rps, then ``factor x base``
  from second ``at`` on.
* ``csv:PATH[,peak=N][,speedup=X|duration=S][,size=COLUMN][,scale=superpose|multiply][,shift=S][,seed=N]``:
  one row per request, first column a timestamp (ISO date-time or seconds); time-scaled first
  (``speedup`` divides the gaps, ``duration`` stretches the trace to S seconds), then rate-scaled
  so its busiest minute averages ``peak`` rps. ``scale=superpose`` (the default) scales by k as
  traffic from k times the users would arrive: k independent copies of the trace, each shifted by
  its own uniform offset within +-``shift`` seconds (default 300, wrapping around the end), the
  last copy thinned to the fraction of k; bursts thin out as aggregation thins them and the rate's
  shape on scales above the shift stays. ``scale=multiply`` multiplies every second's count by k:
  every burst arrives k times as one clump (the worst case).
* ``azure-conv`` / ``azure-code``: the shipped Azure LLM inference traces (``data/traces/``),
  the same keys as ``csv``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from dataclasses import dataclass, field

import numpy as np

from speech.errors import SpeechError

SUPERPOSE_SHIFT_S = 300.0
"""Default largest offset (s) of a superposed copy: structure longer than about twice this keeps."""
SCALINGS = ("superpose", "multiply")
PEAK_WINDOW_S = 60
"""A trace's peak is its busiest minute (mean arrivals per second over 60 s), not its busiest
second: a per-second peak of a Poisson trace is mostly noise."""
from speech.sim.names import ATTRIBUTION, BUILTIN_TRACES  # noqa: F401  (re-exported; the help texts read speech.sim.names)


class TraceError(SpeechError):
    """A trace spec or trace file that cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class Trace:
    """Expected arrivals per 1 s step, with what made them."""

    name: str
    spec: str
    arrivals: np.ndarray
    """Arrivals in each second (float: rate-scaled traces keep fractions)."""
    seed: int | None = None
    source_sha256: str | None = None
    """sha256 of the CSV text a file trace came from."""
    attribution: str | None = None
    times_s: np.ndarray | None = field(default=None, repr=False)
    """Request times (s from the start) of a file trace after time scaling, before rate scaling."""
    sizes: np.ndarray | None = field(default=None, repr=False)
    rate_scale: float = 1.0
    scaling: str | None = None
    """How a file trace was rate-scaled: "superpose" or "multiply" (None: not rate-scaled)."""
    scaling_detail: str | None = None

    @property
    def duration_s(self) -> int:
        return int(self.arrivals.size)

    @property
    def total_requests(self) -> float:
        return float(self.arrivals.sum())

    @property
    def peak_rps(self) -> float:
        return peak_rps(self.arrivals)

    def request_times(self, seed: int = 0, duration_s: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Request timestamps (s) for an open-loop replay, plus sizes when the trace has them.

        A file trace at scale k keeps each request floor(k) times plus once more with probability
        frac(k), each copy at its own uniform offset within the request's second; a generated trace
        draws its integer arrivals uniformly within each second. Seeded, so a replay is repeatable.
        """
        rng = np.random.default_rng(seed)
        limit = self.duration_s if duration_s is None else min(float(duration_s), self.duration_s)
        if self.times_s is not None:
            t = self.times_s
            k = self.rate_scale
            copies = np.floor(k).astype(int) + (rng.random(t.size) < k - math.floor(k))
            base = np.repeat(t, copies)
            jitter = np.where(np.repeat(copies, copies) > 1, rng.random(base.size) - 0.5, 0.0)
            times = np.clip(base + jitter, 0.0, None)
            sizes = np.repeat(self.sizes, copies) if self.sizes is not None else None
        else:
            counts = np.rint(self.arrivals[: int(math.ceil(limit))]).astype(int)
            times = np.repeat(np.arange(counts.size, dtype=float), counts) + rng.random(int(counts.sum()))
            sizes = None
        order = np.argsort(times, kind="stable")
        times = times[order]
        sizes = sizes[order] if sizes is not None else None
        keep = times < limit
        return times[keep], (sizes[keep] if sizes is not None else None)


def peak_rps(arrivals: np.ndarray, window_s: int = PEAK_WINDOW_S) -> float:
    """Highest mean arrival rate over any ``window_s`` consecutive seconds (the whole trace if shorter)."""
    a = np.asarray(arrivals, dtype=float)
    if a.size == 0:
        return 0.0
    w = min(window_s, a.size)
    c = np.concatenate([[0.0], np.cumsum(a)])
    return float(((c[w:] - c[:-w]) / w).max())


# --- generators --------------------------------------------------------------------------------


def diurnal_rate(
    *,
    peak: float,
    trough: float,
    duration_s: int,
    spikes: int,
    spike_factor: float,
    spike_s: int,
    seed: int,
) -> np.ndarray:
    """The diurnal tide with trapezoid spikes, rescaled above ``trough`` to reach exactly ``peak``."""
    t = np.arange(duration_s, dtype=float)
    tide = trough + (peak - trough) * (1.0 - np.cos(2.0 * np.pi * t / duration_s)) / 2.0
    rng = np.random.default_rng(seed)
    boost = np.zeros(duration_s)
    ramp = 60.0
    for start in rng.uniform(0.1 * duration_s, 0.9 * duration_s - spike_s - 2 * ramp, size=spikes):
        up = np.clip((t - start) / ramp, 0.0, 1.0)
        down = np.clip((start + 2 * ramp + spike_s - t) / ramp, 0.0, 1.0)
        boost = np.maximum(boost, np.minimum(up, down))
    rate = tide * (1.0 + (spike_factor - 1.0) * boost)
    top = rate.max()
    if top > trough:
        rate = trough + (rate - trough) * (peak - trough) / (top - trough)
    return rate


def poisson_arrivals(rate: np.ndarray, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).poisson(np.clip(rate, 0.0, None)).astype(float)


# --- spec parsing ------------------------------------------------------------------------------


def parse_spec(spec: str) -> tuple[str, str | None, dict[str, str]]:
    """``KIND[:k=v,...]`` -> (kind, path for csv, options). A bare ``*.csv`` is ``csv:PATH``."""
    spec = spec.strip()
    if not spec:
        raise TraceError("--trace is empty; pass e.g. diurnal:peak=5000 or azure-conv:peak=500")
    if spec.lower().endswith(".csv") and ":" not in spec.split("/")[0]:
        return "csv", spec, {}
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    path = None
    opts: dict[str, str] = {}
    parts = [p for p in rest.split(",") if p.strip()] if rest else []
    if kind == "csv":
        if not parts or "=" in parts[0]:
            raise TraceError(f"--trace {spec!r}: csv needs a path first, e.g. csv:requests.csv,peak=500")
        path, parts = parts[0].strip(), parts[1:]
    for p in parts:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise TraceError(f"--trace {spec!r}: {p!r} is not key=value; e.g. {kind}:peak=5000,seed=1")
        opts[k.strip().lower()] = v.strip()
    return kind, path, opts


def _num(opts: dict[str, str], key: str, default, spec: str, *, minimum: float = 0.0, integer: bool = False, strict: bool = False):
    if key not in opts:
        return default
    raw = opts.pop(key)
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise TraceError(f"--trace {spec!r}: {key}={raw!r} is not a {'whole ' if integer else ''}number") from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise TraceError(f"--trace {spec!r}: {key}={raw} must be {'>' if strict else '>='} {minimum:g}")
    return value


def _no_leftovers(opts: dict[str, str], spec: str, allowed: str) -> None:
    if opts:
        raise TraceError(f"--trace {spec!r}: unknown key(s) {', '.join(sorted(opts))}; this kind takes {allowed}")


def generate(spec: str, default_seed: int = 1) -> Trace:
    """A built-in generator trace from its spec (no files): diurnal, steady or step."""
    kind, _, opts = parse_spec(spec)
    seed = _num(opts, "seed", default_seed, spec, integer=True)
    if kind == "diurnal":
        peak = _num(opts, "peak", None, spec, strict=True)
        if peak is None:
            raise TraceError(f"--trace {spec!r}: diurnal needs peak=N (requests/s at the busiest minute)")
        trough = _num(opts, "trough", peak / 20.0, spec)
        if trough > peak:
            raise TraceError(f"--trace {spec!r}: trough={trough:g} exceeds peak={peak:g}")
        hours = _num(opts, "hours", 24.0, spec, strict=True)
        spikes = _num(opts, "spikes", 3, spec, integer=True)
        factor = _num(opts, "spike_factor", 1.2, spec, minimum=1.0)
        spike_s = _num(opts, "spike_s", 300, spec, integer=True, minimum=1)
        _no_leftovers(opts, spec, "peak, trough, hours, spikes, spike_factor, spike_s, seed")
        _check_generated(spec, hours * 3600, peak)
        duration = int(round(hours * 3600))
        if duration < 4 * (spike_s + 120) and spikes:
            raise TraceError(f"--trace {spec!r}: hours={hours:g} is too short for {spikes} spikes of {spike_s} s; lower spikes or spike_s")
        rate = diurnal_rate(peak=peak, trough=trough, duration_s=duration, spikes=spikes, spike_factor=factor,
                            spike_s=spike_s, seed=seed)
    elif kind == "steady":
        rps = _num(opts, "rps", None, spec)
        if rps is None:
            raise TraceError(f"--trace {spec!r}: steady needs rps=N")
        duration = _num(opts, "duration", 3600, spec, integer=True, minimum=1)
        _no_leftovers(opts, spec, "rps, duration, seed")
        _check_generated(spec, duration, rps)
        rate = np.full(duration, rps)
    elif kind == "step":
        base = _num(opts, "base", None, spec)
        if base is None:
            raise TraceError(f"--trace {spec!r}: step needs base=N (rps before the step)")
        factor = _num(opts, "factor", 3.0, spec)
        at = _num(opts, "at", 600, spec, integer=True)
        duration = _num(opts, "duration", 1800, spec, integer=True, minimum=1)
        _no_leftovers(opts, spec, "base, factor, at, duration, seed")
        _check_generated(spec, duration, base * factor)
        if at >= duration:
            raise TraceError(f"--trace {spec!r}: at={at} must be before the end (duration={duration})")
        rate = np.where(np.arange(duration) < at, base, base * factor).astype(float)
    else:
        raise TraceError(
            f"--trace {spec!r}: unknown kind {kind!r}; use diurnal, steady, step, csv:PATH or one of "
            f"{', '.join(BUILTIN_TRACES)}"
        )
    return Trace(name=kind, spec=spec, arrivals=poisson_arrivals(rate, seed), seed=seed)


def _check_generated(spec: str, duration_s: float, top_rps: float) -> None:
    """A generated trace's size and rate, before its arrays are allocated."""
    if duration_s > MAX_TRACE_S:
        raise TraceError(f"--trace {spec!r}: {duration_s:,.0f} s is longer than a trace may be ({MAX_TRACE_S:,} s, "
                         "7 days); pass a shorter duration/hours")
    if top_rps > MAX_RATE_RPS:
        raise TraceError(f"--trace {spec!r}: {top_rps:g} rps is above {MAX_RATE_RPS:,.0f} rps; pass a lower rate")


MAX_TRACE_S = 7 * 86_400
"""Longest trace, after time scaling: a week of 1 s steps (the simulator holds a few arrays of
this length per policy). Checked before any per-second array is allocated."""
MAX_TRACE_BYTES = 256 * 2**20
"""Largest trace file read (the shipped Azure traces are 0.3 and 0.7 MB)."""
MAX_RATE_RPS = 1_000_000.0
"""Highest rate a generated or rate-scaled trace may reach (Poisson draws of more overflow)."""


def _column_name(header: list[str] | None, idx: int) -> str:
    return f"column {idx + 1}" + (f" ({header[idx]!r})" if header and idx < len(header) else "")


def _floats(rows: list[tuple[int, list[str]]], idx: int, name: str, header: list[str] | None, what: str) -> np.ndarray:
    """Column ``idx`` as finite floats; the first bad value is named by file, line and column."""
    out = np.empty(len(rows))
    for i, (line, r) in enumerate(rows):
        raw = r[idx] if idx < len(r) else ""
        try:
            v = float(raw)
        except ValueError:
            raise TraceError(f"{name}: line {line}, {_column_name(header, idx)}: {raw!r} is not {what}; "
                             "fix or remove the row") from None
        if not math.isfinite(v):
            raise TraceError(f"{name}: line {line}, {_column_name(header, idx)}: {raw!r} is not a finite number; "
                             "fix or remove the row")
        out[i] = v
    return out


def _parse_times(rows: list[tuple[int, list[str]]], name: str, header: list[str] | None) -> np.ndarray:
    """First column as seconds from the earliest request: seconds (finite numbers) when the first
    row's value is a number, else ISO date-times; the first bad value is named by line."""
    first = rows[0][1][0].strip()
    try:
        float(first)
        numeric = True
    except ValueError:
        numeric = False
    if numeric:
        return _floats(rows, 0, name, header, "a timestamp in seconds (the first row's is a number)")
    stamps = np.empty(len(rows), dtype="datetime64[ns]")
    for i, (line, r) in enumerate(rows):
        raw = r[0].strip()
        try:
            stamps[i] = np.datetime64(raw.replace(" ", "T"), "ns")
        except (ValueError, OverflowError):
            raise TraceError(f"{name}: line {line}, {_column_name(header, 0)}: {raw!r} is not an ISO date-time "
                             "(e.g. 2023-11-16 18:15:46.68); fix or remove the row") from None
        if np.isnat(stamps[i]):
            raise TraceError(f"{name}: line {line}, {_column_name(header, 0)}: {raw!r} is not a date-time; fix or "
                             "remove the row")
    return (stamps - stamps.min()).astype("timedelta64[ns]").astype(np.int64) / 1e9


def from_csv_text(text: str, *, name: str, spec: str, opts: dict[str, str], attribution: str | None = None) -> Trace:
    """A file trace: one row per request, first column its timestamp, optional header and size column.

    ``opts`` (consumed): ``speedup`` or ``duration`` (time scaling), ``peak`` (rate scaling to a
    busiest-minute average), ``size`` (column name or number kept as each request's size).
    A bad value is named by file, line and column; the trace after time scaling is at most
    :data:`MAX_TRACE_S` long, checked before its per-second array is allocated.
    """
    opts = dict(opts)
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"{name}: {len(text):,} characters, more than a trace may hold ({MAX_TRACE_BYTES // 2**20} MiB)")
    reader = csv.reader(io.StringIO(text))
    rows: list[tuple[int, list[str]]] = []
    try:
        for r in reader:
            if r and any(c.strip() for c in r):
                rows.append((reader.line_num, r))
    except csv.Error as err:
        raise TraceError(f"{name}: line {reader.line_num}: not valid CSV ({err}); fix the file") from None
    if not rows:
        raise TraceError(f"{name}: no rows; a trace has one request per row, its timestamp first")
    header = None
    try:
        float(rows[0][1][0])
    except ValueError:
        if not rows[0][1][0].strip()[:1].isdigit():
            header, rows = [c.strip() for c in rows[0][1]], rows[1:]
    if not rows:
        raise TraceError(f"{name}: only a header, no requests")
    times = _parse_times(rows, name, header)
    sizes = None
    if "size" in opts:
        col = opts.pop("size")
        idx = header.index(col) if header and col in header else (int(col) if col.isdigit() else None)
        short = next((line for line, r in rows if idx is not None and len(r) <= idx), None)
        if idx is None or short is not None:
            where = f" (line {short} has {len(dict(rows)[short])} column(s))" if short is not None else ""
            raise TraceError(f"{spec!r}: size={col!r} is not a column of {name}{where} (columns: {header or 'unnamed'})")
        sizes = _floats(rows, idx, name, header, "a number (the size column)")
    order = np.argsort(times, kind="stable")
    times = times[order] - times.min()
    sizes = sizes[order] if sizes is not None else None
    speedup = _num(opts, "speedup", None, spec, strict=True)
    duration = _num(opts, "duration", None, spec, strict=True)
    if speedup is not None and duration is not None:
        raise TraceError(f"--trace {spec!r}: pass speedup or duration, not both")
    span = float(times[-1]) if times.size > 1 else 1.0
    if duration is not None:
        speedup = span / duration if span > 0 else 1.0
    if speedup is not None:
        times = times / speedup
    peak = _num(opts, "peak", None, spec, strict=True)
    method = opts.pop("scale", "superpose").strip().lower()
    if method not in SCALINGS:
        raise TraceError(f"--trace {spec!r}: scale={method!r}; use scale=superpose (independent shifted copies, the "
                         "default) or scale=multiply (every count times k: bursts as clumps, the worst case)")
    shift = _num(opts, "shift", SUPERPOSE_SHIFT_S, spec)
    seed = _num(opts, "seed", 1, spec, integer=True)
    _no_leftovers(opts, spec, "peak, speedup, duration, size, scale, shift, seed")
    if times[-1] >= MAX_TRACE_S:
        raise TraceError(f"{name}: spans {times[-1]:,.0f} s{' after time scaling' if speedup is not None else ''}, longer "
                         f"than a trace may be ({MAX_TRACE_S:,} s, 7 days of 1 s steps); pass speedup=X or duration=S "
                         "in --trace, or check the timestamps (seconds, not milliseconds?)")
    if peak is not None and peak > MAX_RATE_RPS:
        raise TraceError(f"--trace {spec!r}: peak={peak:g} is above {MAX_RATE_RPS:,.0f} rps; pass a lower peak")
    n_s = int(math.floor(times[-1])) + 1
    counts = np.bincount(np.floor(times).astype(int), minlength=n_s).astype(float)
    sha = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    if peak is None:
        return Trace(name=name, spec=spec, arrivals=counts, source_sha256=sha, attribution=attribution, times_s=times,
                     sizes=sizes)
    k = peak / peak_rps(counts)
    if method == "multiply":
        return Trace(name=name, spec=spec, arrivals=counts * k, source_sha256=sha, attribution=attribution, times_s=times,
                     sizes=sizes, rate_scale=k, seed=None, scaling="multiply",
                     scaling_detail=f"every second's count x {k:.4g}")
    sup_times, sup_sizes, copies = superpose_to_peak(times, sizes, peak, span_s=float(n_s), shift_s=shift, seed=seed)
    sup_counts = np.bincount(np.floor(sup_times).astype(int), minlength=n_s).astype(float)[:n_s]
    residual = peak / peak_rps(sup_counts)
    return Trace(
        name=name, spec=spec, arrivals=sup_counts * residual, source_sha256=sha, attribution=attribution, seed=seed,
        times_s=sup_times, sizes=sup_sizes, rate_scale=residual, scaling="superpose",
        scaling_detail=(f"{copies:.4g} independent copies (k = {k:.4g} by multiplication), each shifted uniformly within "
                        f"+-{shift:g} s, wrapping; then x {residual:.4g} to the exact peak"),
    )


def superpose(times: np.ndarray, sizes: np.ndarray | None, copies: float, *, span_s: float, shift_s: float,
              seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``copies`` independent copies of the request times (floor(copies) whole, one more with each
    request kept with probability frac(copies)), each shifted by its own uniform offset in
    [-shift_s, shift_s] and wrapped into [0, span_s). Sorted; sizes follow their requests."""
    rng = np.random.default_rng(seed)
    whole = int(math.floor(copies))
    frac = copies - whole
    parts, size_parts = [], []
    for c in range(whole + (1 if frac > 1e-12 else 0)):
        keep = np.ones(times.size, bool) if c < whole else rng.random(times.size) < frac
        off = rng.uniform(-shift_s, shift_s) if c > 0 or whole == 0 else 0.0  # the first copy is the trace itself
        parts.append(np.mod(times[keep] + off, span_s))
        if sizes is not None:
            size_parts.append(sizes[keep])
    out = np.concatenate(parts) if parts else np.zeros(0)
    order = np.argsort(out, kind="stable")
    return out[order], (np.concatenate(size_parts)[order] if sizes is not None else None)


def superpose_to_peak(times: np.ndarray, sizes: np.ndarray | None, peak: float, *, span_s: float, shift_s: float,
                      seed: int, rounds: int = 4) -> tuple[np.ndarray, np.ndarray | None, float]:
    """Superposed copies whose busiest minute is near ``peak``: superposition lowers the peak
    below k x the original's (bursts no longer coincide), so the number of copies is raised by the
    shortfall a few times (same seed). Returns (times, sizes, copies)."""
    n_s = int(math.ceil(span_s))
    base = peak_rps(np.bincount(np.floor(times).astype(int), minlength=n_s).astype(float))
    copies = peak / base
    for _ in range(rounds):
        t, z = superpose(times, sizes, copies, span_s=span_s, shift_s=shift_s, seed=seed)
        used = copies
        got = peak_rps(np.bincount(np.floor(t).astype(int), minlength=n_s).astype(float))
        if got <= 0 or abs(got / peak - 1) < 0.01:
            break
        copies *= peak / got
    return t, z, used
