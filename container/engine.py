"""Admission gate, G2P stage, deadline scheduler and inference workers.

Everything that touches the model runs in threads; the event loop only moves bytes and decides.
Pipeline per request: split into segments -> G2P thread (one, espeak is not thread-safe) ->
ready heap ordered by playback deadline (EDF) -> inference threads -> reorder -> stream.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from . import stage
from .audio import to_pcm16
from .backends.base import Backend, Prepared
from .errors import BadRequest, ContainerError, Draining, ModelUnavailable, QueueSaturated, ShedDeadline
from .job import END as _END
from .job import Job
from .metrics import MetricsRecorder
from .normalize import Options as NormalizationOptions
from .settings import Settings
from .stage import Pause

log = logging.getLogger("container.engine")
def segment_deadline(arrival: float, slo_s: float, audio_before_s: float) -> float:
    """When a segment's audio must exist for gap-free playback: the first one by the SLO, each
    later one once the audio before it has played. Ordering by this (earliest deadline first)
    gives new requests' first segments priority over the tails of requests already playing."""
    return arrival + slo_s + audio_before_s


@dataclass(order=True)
class _Ready:
    key: tuple
    job: Job = field(compare=False)
    index: int = field(compare=False)
    prepared: Prepared = field(compare=False)


class Engine:
    def __init__(self, settings: Settings, backend: Backend, metrics: MetricsRecorder):
        self.s = settings
        self.backend = backend
        self.metrics = metrics
        self.ready = False
        self.load_error: str | None = None
        self.draining = False
        self.active: set[Job] = set()
        self._seq = itertools.count()
        self._heap: list[_Ready] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._used = 0  # slots taken by runs in flight (see _capacity)
        self._inflight: list[list[_Ready]] = []  # batches in the backend now (cancel aborts them)
        self._running = 0
        # Seconds of inference per token, learned online; seeds the shedding estimate.
        self._s_per_token = 0.01
        self._g2p_pool = ThreadPoolExecutor(1, thread_name_prefix="g2p")
        # Sized on first dispatch: the backend states its layout only once it has seen the device.
        self._infer_pool: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task] = []

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._dispatch_loop(), name="dispatch"))
        self._tasks.append(asyncio.create_task(self._tick(), name="shed-tick"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._g2p_pool.shutdown(wait=False, cancel_futures=True)
        if self._infer_pool is not None:
            self._infer_pool.shutdown(wait=False, cancel_futures=True)

    def begin_drain(self) -> None:
        self.draining = True
        log.info("draining: %d active request(s)", len(self.active))

    async def wait_idle(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def calibrate(self, seconds: float, tokens: int) -> None:
        if tokens > 0 and seconds > 0:
            self._s_per_token = 0.7 * self._s_per_token + 0.3 * (seconds / tokens)

    # ---- admission -------------------------------------------------------------------
    def submit(self, text: str, voice: str | None, speed: float, stream: bool = True,
               timestamps: bool = False, *, lang: str | None = None,
               normalization: NormalizationOptions | None = None, volume: float = 1.0,
               phonemes: bool = False, tags: bool = False, voice_map: dict | None = None,
               voice_rate: float = 1.0) -> Job:
        if timestamps and not self.backend.supports_timestamps:
            raise BadRequest(f"word timestamps need a model that reports its durations; BACKEND="
                             f"{self.backend.name} does not (use BACKEND=onnx or torch)")
        if self.draining:
            self.metrics.record("rejected")
            raise Draining("server is shutting down")
        if not self.ready:
            raise ModelUnavailable(self.load_error or "model is loading")
        # validate_request resolves the voice against the backend's voices, never empty once it is ready.
        assert voice is not None
        if len(self.active) >= self.s.queue_max_depth:
            self.metrics.record("rejected")
            raise QueueSaturated(f"{len(self.active)} requests queued or executing "
                                 f"(QUEUE_MAX_DEPTH={self.s.queue_max_depth})")
        # Segments are found in the G2P thread as it goes (segmentation and normalization are
        # CPU work that grows with the text; the first segment must not wait for the last).
        job = Job(id=uuid.uuid4().hex, segments=[], voice=voice, speed=speed,
                  arrival=time.monotonic(), seq=next(self._seq),
                  stream=stream and not self.s.serialize, timestamps=timestamps, text=text,
                  lang=lang, normalization=normalization, volume=volume, phonemes=phonemes,
                  tags=tags, voice_map=voice_map or {}, voice_rate=voice_rate)
        self.active.add(job)
        self._idle.clear()
        self.metrics.record("admitted")
        self._update_gauges()
        asyncio.get_running_loop().create_task(self._g2p(job))
        return job

    def cancel(self, job: Job) -> None:
        """Client went away: stop spending compute on it."""
        if not job.finished:
            job.cancelled = True
            self.metrics.record("cancelled")
            self._finish(job, None)
            # Its segment in the model now: stopped where the backend can (onnx), so the cores
            # go to the next request instead of finishing audio nobody will hear.
            for batch in self._inflight:
                if any(r.job is job for r in batch) and all(r.job.cancelled for r in batch):
                    for r in batch:
                        self.backend.abort(r.prepared)

    # ---- G2P stage -------------------------------------------------------------------
    def speaks_english(self, lang: str | None) -> bool:
        return (lang or self.s.g2p_language).lower().startswith("en")

    def segments_of(self, job: Job):
        """The texts to synthesize, in order (container/stage.py), with Pause and Switch items."""
        return stage.segments(job, self.s, self.backend, self.speaks_english(job.lang))

    def _prepare_next(self, job: Job, segments, cur: stage.Voice):
        return stage.prepare_next(job, segments, cur, self.s, self.backend)

    async def _g2p(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        audio_before = 0.0
        segments = self.segments_of(job)
        cur = stage.Voice(job.voice, job.voice_rate)
        try:
            while not job.finished:
                step = await loop.run_in_executor(self._g2p_pool, self._prepare_next, job, segments, cur)
                if job.finished:
                    return
                if step is None:
                    job.listed = True
                    self._maybe_complete(job)
                    return
                i = len(job.segments)
                if isinstance(step, Pause):
                    job.segments.append("")
                    audio_before += step.seconds
                    # Silence needs no model run: delivered in order like any segment's audio.
                    self._deliver(job, i, np.zeros(round(step.seconds * self.backend.sample_rate), np.float32), [])
                    continue
                seg, p = step
                job.segments.append(seg)
                job.input_tokens += p.n_tokens
                key = ((job.seq, i) if self.s.serialize else
                       (segment_deadline(job.arrival, self.s.slo_ms / 1000, audio_before), job.seq, i))
                audio_before += p.est_audio_s
                heapq.heappush(self._heap, _Ready(key, job, i, p))
                self._wake.set()
        except ContainerError as e:  # e.g. a backend that takes no phonemes: the request's 4xx
            self._finish(job, e)
        except Exception as e:  # a G2P failure ends this request, not the server
            log.exception("G2P failed for request %s", job.id)
            self._finish(job, ContainerError(f"G2P failed: {type(e).__name__}"))

    async def warm_text(self) -> None:
        """Import pysbd and run a segmentation and a normalization once, on the G2P thread, so
        the first request does not pay the import and pysbd's rule compilation (~0.1 s)."""
        job = Job(id="warmup", segments=[], voice="", speed=1.0, arrival=time.monotonic(), seq=-1, stream=False,
                  text="Dr. Smith paid $5.50 at 3 p.m. today. It was 12/01/2025.")
        await asyncio.get_running_loop().run_in_executor(self._g2p_pool, lambda: list(self.segments_of(job)))

    async def phonemize(self, text: str, lang: str | None,
                        normalization: NormalizationOptions | None) -> tuple[str, str, list[int]]:
        """(normalized text, phonemes, token ids) as the speech routes would make them, on the
        G2P thread (espeak is not thread-safe). Not admitted through the gate: no model run."""
        if not self.ready:
            raise ModelUnavailable(self.load_error or "model is loading")
        job = Job(id="phonemize", segments=[], voice="", speed=1.0, arrival=time.monotonic(), seq=-1,
                  stream=False, text=text, lang=lang, normalization=normalization)

        def work():
            said = [seg for seg in self.segments_of(job) if isinstance(seg, str)]
            ps = [self.backend.phonemize(seg, lang) for seg in said]
            return said, ps

        said, ps = await asyncio.get_running_loop().run_in_executor(self._g2p_pool, work)
        phonemes = " ".join(p for p in ps if p)
        vocab = self.backend.token_vocab() or {}
        return " ".join(said), phonemes, [vocab[c] for c in phonemes if c in vocab]

    # ---- scheduler -------------------------------------------------------------------
    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            if self._heap:
                self._wake.set()

    def _shed_stale(self, now: float) -> None:
        """Shed queued requests that can no longer produce a first byte within the SLO."""
        if self.s.serialize or len(self.active) <= 1:
            # A request alone (cancelled ones are no longer active) is never shed: shedding it
            # frees nothing for anyone, and the time it waited on an abandoned run is not its own.
            return
        slo = self.s.slo_ms / 1000
        keep = []
        for r in self._heap:
            job = r.job
            if job.finished:
                continue
            if not job.started and r.index == 0:
                est = r.prepared.n_tokens * self._s_per_token
                if now + est > job.arrival + slo:
                    self.metrics.record("shed")
                    self._finish(job, ShedDeadline(
                        f"queued {1000 * (now - job.arrival):.0f} ms; first audio would miss "
                        f"SLO_MS={self.s.slo_ms:.0f}"))
                    continue
            keep.append(r)
        if len(keep) != len(self._heap):
            heapq.heapify(keep)
            self._heap = keep

    def _pop_batch(self) -> list[_Ready]:
        first = heapq.heappop(self._heap)
        batch = [first]
        limit = self.backend.max_batch_size
        if limit > 1 and first.prepared.batch_key is not None:
            rest = []
            while self._heap and len(batch) < limit:
                r = heapq.heappop(self._heap)
                if r.prepared.batch_key == first.prepared.batch_key and not r.job.finished:
                    batch.append(r)
                else:
                    rest.append(r)
            for r in rest:
                heapq.heappush(self._heap, r)
        return batch

    async def _dispatch_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._dispatch()
            # Only what is still waiting after dispatch can be shed: a segment about to run
            # is never dropped for a slow estimate.
            self._shed_stale(time.monotonic())

    def _capacity(self) -> int:
        """Slots runs may take at once: the backend's parallel runs, else INFER_CORES."""
        # Settings._derive_cores fills INFER_CORES when it is not set.
        return self.backend.parallel_runs or cast(int, self.s.infer_cores)

    def _dispatch(self) -> None:
        total = self._capacity()
        if self._infer_pool is None:
            self._infer_pool = ThreadPoolExecutor(total, thread_name_prefix="infer")
        while self._heap and self._used < total:
            if self._heap[0].job.finished:
                heapq.heappop(self._heap)
                continue
            if self.s.serialize:
                # Baseline: one request at a time, all cores on it.
                if self._running:
                    break
                width = total
            elif self.backend.width_matters and self._running == 0 and len(self._heap) == 1:
                width = total  # a lone segment gets every core: lowest latency
            else:
                width = 1  # several waiting: parallel 1-thread runs, more audio per second
            if width > total - self._used:
                break
            batch = self._pop_batch()
            now = time.monotonic()
            for r in batch:
                r.job.started = True
                if r.job.service_started_at is None:
                    r.job.service_started_at = now
            self._used += width
            self._running += 1
            self._update_gauges()
            asyncio.get_running_loop().create_task(self._run(batch, width))

    async def _run(self, batch: list[_Ready], width: int) -> None:
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        alone_at_start = self._running == 1
        self._inflight.append(batch)
        try:
            audios = await loop.run_in_executor(self._infer_pool, self.backend.infer,
                                                [r.prepared for r in batch], width)
            alone = alone_at_start and self._running == 1 and len(batch) == 1
            for r in batch:
                r.job.service_alone = alone
            if width == 1 or self._running == 1:
                self.calibrate((time.monotonic() - t0) / len(batch),
                               int(np.mean([r.prepared.n_tokens for r in batch])))
            for r, audio in zip(batch, audios, strict=True):
                words: list[tuple] | None = (self.backend.word_times(r.prepared, audio)
                                             if r.job.timestamps else None)
                if words and r.job.tags:  # Kokoro-FastAPI names each word's voice when tags are on
                    words = [(*w, r.prepared.voice) for w in words]
                self._deliver(r.job, r.index, audio, words)
        except ModelUnavailable as e:
            # The backend lost its model (a torch worker process died): these requests get the
            # 503 with its reason, and /ping turns 503 so the instance is taken out of service.
            log.error("model unavailable: %s", e.detail)
            self.ready = False
            self.load_error = e.detail
            for r in batch:
                self._finish(r.job, e)
        except Exception as e:
            if all(r.job.cancelled for r in batch):
                # Stopped by abort(): nobody waits for this audio.
                self.metrics.record("run_aborted")
                log.info("run of cancelled request(s) %s stopped: %s", ",".join(r.job.id for r in batch),
                         type(e).__name__)
                return
            log.exception("inference failed")
            for r in batch:
                self._finish(r.job, ContainerError(f"inference failed: {type(e).__name__}"))
        finally:
            self._inflight.remove(batch)
            self._used -= width
            self._running -= 1
            self._wake.set()

    # ---- output ----------------------------------------------------------------------
    def _deliver(self, job: Job, index: int, audio: np.ndarray,
                 words: list[tuple] | None = None) -> None:
        """words: (word, start s, end s[, voice]) relative to this segment's audio."""
        if job.finished:
            return
        job._results[index] = to_pcm16(audio * job.volume if job.volume != 1.0 else audio)
        job._words[index] = words or []
        job.audio_samples += int(audio.size)
        while job._next in job._results:
            pcm = job._results.pop(job._next)
            # Segment-relative times -> times from the start of the request's audio.
            offset = job._released_samples / self.backend.sample_rate
            seg_words = [(w, round(a + offset, 3), round(b + offset, 3), *rest)
                         for w, a, b, *rest in job._words.pop(job._next)]
            job._released_samples += len(pcm) // 2
            job.released.append(len(pcm) // 2)
            job._next += 1
            item = (pcm, seg_words) if job.timestamps else pcm
            if job.stream:
                if job.first_byte_at is None:
                    self._mark_first_byte(job)
                job.out.put_nowait(item)
            else:
                job._results.setdefault("all", []).append(item)
        self._maybe_complete(job)

    def _maybe_complete(self, job: Job) -> None:
        """Finish the job once the G2P stage has listed every segment and all are delivered."""
        if job.finished or not job.listed:
            return
        if job._next == len(job.segments):
            if not job.stream:
                self._mark_first_byte(job)
                parts = job._results.pop("all", [])
                if job.timestamps:
                    job.out.put_nowait((b"".join(p for p, _ in parts), [w for _, ws in parts for w in ws]))
                else:
                    job.out.put_nowait(b"".join(parts))
            self._finish(job, None)

    def _mark_first_byte(self, job: Job) -> None:
        job.first_byte_at = time.monotonic()
        ttfab_ms = job.ttfab_ms
        assert ttfab_ms is not None  # first_byte_at is set on the line above
        self.metrics.record_ttfab(ttfab_ms)
        if job.service_alone and job.service_started_at is not None:
            self.metrics.record_service((job.first_byte_at - job.service_started_at) * 1000)

    def _finish(self, job: Job, error: ContainerError | None) -> None:
        if job.finished:
            return
        job.finished = True
        job.out.put_nowait(error if error is not None else _END)
        self.active.discard(job)
        self._update_gauges()
        if not self.active:
            self._idle.set()
            if self.draining:
                log.info("draining: active requests reached 0")

    def _update_gauges(self) -> None:
        queued = sum(1 for j in self.active if not j.started)
        self.metrics.queued = queued
        self.metrics.concurrent = len(self.active)
