"""A client alone on the server is never shed, and an abandoned request's remaining work is
stopped (issue 47). Real servers on the sine backend, whose runs are slow on purpose and can be
aborted like onnx runs; verdicts are status codes, byte counts and the server's own counters,
never elapsed time."""
from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

from tests.container.conftest import counter

# Starts servers (subprocesses): not in the fast tier.
pytestmark = pytest.mark.slow

LONG = " ".join(f"Sentence number {w} of a long answer." for w in ("one", "two", "three", "four", "five"))


def test_a_lone_client_that_hangs_up_and_asks_again_is_served(server_factory):
    # Each model run takes 2 s and the SLO is 0.3 s: before issue 47 the second request queued
    # behind the first one's abandoned run and was shed (503 shed_deadline) though alone.
    srv = server_factory({"BACKEND": "sine", "SINE_DELAY_MS": 2000, "INFER_CORES": 1, "SINE_MAX_BATCH": 1,
                          "SLO_MS": 300})
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        with c.stream("POST", "/invocations", json={"text": LONG, "response_format": "pcm"}) as r:
            assert r.status_code == 200
            first = next(r.iter_bytes())
            assert first  # the first sentence's audio; the second sentence is in the model now
        # the stream is closed: the client is gone; it asks again at once
        again = c.post("/invocations", json={"text": "Short one.", "response_format": "pcm"})
        assert again.status_code == 200, again.text
        assert len(again.content) == 2 * int(len("Short one.") * 0.07 * 24000)
        metrics = c.get("/metrics").text
    assert counter(metrics, "speech_requests_total", "shed") == 0
    assert counter(metrics, "speech_requests_total", "cancelled") == 1
    # the abandoned request's run in flight was stopped, and none of its later sentences ran
    assert counter(metrics, "speech_runs_aborted_total") == 1
    assert counter(metrics, "speech_requests_total", "admitted") == 2


def test_pause_tags_are_silence_of_the_asked_length(sine_server):
    r = httpx.post(sine_server.url + "/invocations", json={"text": "Hi [pause:1.5s] there [PAUSE:99s]",
                                                   "response_format": "pcm"}, timeout=60)
    assert r.status_code == 200, r.text
    pcm = np.frombuffer(r.content, dtype="<i2")
    hi, there = int(2 * 0.07 * 24000), int(5 * 0.07 * 24000)  # sine: 0.07 s per character
    assert pcm.size == hi + 36000 + there + 240000  # 1.5 s, then 99 s cut to PAUSE_MAX_S (10 s)
    assert np.all(pcm[hi:hi + 36000] == 0) and np.any(pcm[:hi] != 0)
    assert np.any(pcm[hi + 36000:hi + 36000 + there] != 0) and np.all(pcm[hi + 36000 + there:] == 0)
    assert not re.search("pause", r.headers.get("Warning", ""))


def test_real_model_aborts_the_abandoned_run(onnx_server):
    """The issue's case on the real weights (onnx): the run in flight when the client goes is
    ended through onnxruntime's RunOptions.terminate, and the re-request is served. Counters are
    read as differences: the server is shared by the session's tests."""
    text = " ".join(f"This is sentence number {w} of a long answer that keeps going." for w in
                    ("one", "two", "three", "four", "five", "six", "seven", "eight"))
    with httpx.Client(base_url=onnx_server.url, timeout=300) as c:
        before = c.get("/metrics").text
        with c.stream("POST", "/v1/audio/speech", json={"input": text, "voice": "jf_alpha",
                                                        "response_format": "pcm"}) as r:
            assert r.status_code == 200
            assert next(r.iter_bytes())
        again = c.post("/v1/audio/speech", json={"input": "Short one.", "voice": "jf_alpha",
                                                 "response_format": "pcm", "stream": False})
        assert again.status_code == 200 and len(again.content) > 4800
        after = c.get("/metrics").text
    delta = {k: counter(after, *k) - counter(before, *k) for k in
             (("speech_requests_total", "shed"), ("speech_requests_total", "cancelled"),
              ("speech_runs_aborted_total", None))}
    assert delta[("speech_requests_total", "shed")] == 0
    assert delta[("speech_requests_total", "cancelled")] == 1
    assert delta[("speech_runs_aborted_total", None)] >= 1
