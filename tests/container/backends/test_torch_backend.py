"""BACKEND=torch (kokoro.KModel) through a real server and in process, on CPU, with random weights.

MODEL_DIR is the session's `torch_model_dir` (tests/container/conftest.py), in the upstream layout
(config.json, kokoro-v1_0.pth, voices/*.pt): the real Kokoro-82M architecture from the published
hyperparameters (kokoro-onnx ships the upstream config.json), random weights, except that the
duration head is fixed so every token lasts exactly FRAMES frames. That makes the output length a
known number while the audio itself is noise.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import numpy as np
import pytest

from container.backends.g2p import EspeakPhonemizer
from tests.container.conftest import ServerProc, needs_torch

# Not in the CPU image (needs_torch: found, imported by the tests that use it), and a Kokoro model in
# the real upstream architecture: not in the fast tier (make test-fast).
pytestmark = [pytest.mark.slow, needs_torch]

VOICE = "af_random"
FRAMES = 2  # per token at speed 1.0; speed 2.0 then rounds to 1
SAMPLES_PER_FRAME = 600  # decoder: x2 (F0 rate) * 10 * 6 upsampling * 5 iSTFT hop
TEXT = "Hello world. How are you?"
ROOT = Path(__file__).resolve().parents[3]

# Loaded by every Python process that inherits PYTHONPATH: any connection or name lookup that
# leaves this machine raises and is logged, so a hub download cannot pass silently.
NETGUARD = textwrap.dedent('''
    import socket, sys
    _LOCAL = ("127.", "::1", "localhost", "0.0.0.0")
    def _is_local(host):
        return isinstance(host, str) and host.startswith(_LOCAL) or host is None
    def _deny(what):
        sys.stderr.write(f"NETGUARD blocked {what}\\n")
        raise OSError(f"network disabled in this test: {what}")
    _connect, _getaddrinfo = socket.socket.connect, socket.getaddrinfo
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
            _deny(f"connect {address}")
        return _connect(self, address)
    def getaddrinfo(host, *a, **k):
        if not _is_local(host if not isinstance(host, bytes) else host.decode()):
            _deny(f"getaddrinfo {host}")
        return _getaddrinfo(host, *a, **k)
    socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
''')


@pytest.fixture(scope="module")
def upstream_dir(torch_model_dir, tmp_path_factory):
    """(the session's random checkpoint in the upstream layout, a directory holding the network
    guard's sitecustomize.py, the model's vocabulary)."""
    guard = tmp_path_factory.mktemp("netguard")
    (guard / "sitecustomize.py").write_text(NETGUARD)
    return torch_model_dir, guard, json.loads((torch_model_dir / "config.json").read_text())["vocab"]


def _env(model_dir, guard) -> dict[str, str]:
    return {"BACKEND": "torch", "MODEL_DIR": str(model_dir), "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": f"{guard}:{ROOT}", "INFER_CORES": "1"}


@pytest.fixture(scope="module")
def torch_server(upstream_dir, tmp_path_factory):
    """One torch server for this module's server tests: a start imports torch and builds KModel, about
    a minute on two loaded cores, and nothing here needs a fresh one. Its MODEL_DIR links the
    module's checkpoint and voice (the same files: the same weights sha256) and adds a second voice,
    am_other, for the blends. Yields the server and that directory."""
    import torch

    model_dir, guard, _ = upstream_dir
    d = tmp_path_factory.mktemp("kokoro-two-voices")
    (d / "voices").mkdir()
    for name in ("config.json", "kokoro-v1_0.pth"):
        (d / name).symlink_to(model_dir / name)
    (d / "voices" / f"{VOICE}.pt").symlink_to(model_dir / "voices" / f"{VOICE}.pt")
    torch.save(torch.randn(510, 1, 256) * 0.1, d / "voices" / "am_other.pt")
    srv = ServerProc(_env(d, guard))
    try:
        srv.wait_ready(timeout=180)
        yield srv, d
    finally:
        srv.stop()


def _expected_samples(text_segments: list[str], vocab: dict, frames: int) -> int:
    """What the model must produce: (tokens + 2 pads) * frames each, per segment."""
    g2p = EspeakPhonemizer("en-us")
    n = 0
    for seg in text_segments:
        tokens = [c for c in g2p(seg) if c in vocab]
        assert tokens, seg
        n += (len(tokens) + 2) * frames * SAMPLES_PER_FRAME
    return n


def test_netguard_blocks_outside_connections(upstream_dir):
    """The guard the server tests rely on must itself work, or their offline claim is empty."""
    _, guard, _ = upstream_dir
    for code, blocked in (("socket.socket().connect(('198.51.100.7', 443))", "connect"),
                          ("socket.getaddrinfo('huggingface.co', 443)", "getaddrinfo")):
        r = subprocess.run([sys.executable, "-c", f"import socket; {code}"],
                           env={"PYTHONPATH": str(guard), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and f"NETGUARD blocked {blocked}" in r.stderr, r.stderr


def test_torch_server_speaks_offline_from_upstream_layout(upstream_dir, torch_server):
    model_dir, _, vocab = upstream_dir
    srv, _ = torch_server
    body = httpx.get(srv.url + "/ping", timeout=30).json()
    assert body["backend"] == "torch"
    sha = hashlib.sha256((model_dir / "kokoro-v1_0.pth").read_bytes()).hexdigest()
    assert body["weights_sha256"] == f"sha256:{sha}"

    chunks = []
    with httpx.stream("POST", srv.url + "/invocations", timeout=120,
                      json={"text": TEXT, "voice": VOICE, "response_format": "pcm"}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"] == "audio/pcm"
        for c in r.iter_raw():  # returns only once the server has ended the stream
            chunks.append(c)
    pcm = np.frombuffer(b"".join(chunks), dtype="<i2")
    want = _expected_samples(["Hello world.", "How are you?"], vocab, FRAMES)
    assert len(pcm) == want, (len(pcm), want)
    assert 0.3 < len(pcm) / 24000 < 5.0
    assert np.count_nonzero(pcm) > 0.5 * len(pcm)  # noise, but not silence

    r = httpx.post(srv.url + "/invocations", timeout=120,
                   json={"text": "Hello world.", "voice": VOICE, "speed": 2.0,
                         "response_format": "wav", "stream": False})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    assert r.content[:4] == b"RIFF"
    assert (len(r.content) - 44) // 2 == _expected_samples(["Hello world."], vocab, FRAMES // 2)

    # Word timestamps from KModel's pred_dur: the duration head is fixed at FRAMES per token, so
    # every word lasts exactly its phonemes x FRAMES x 25 ms, after the leading pad's FRAMES.
    r = httpx.post(srv.url + "/dev/captioned_speech", timeout=120,
                   json={"input": "Hello world.", "voice": VOICE, "response_format": "pcm", "stream": False})
    assert r.status_code == 200, r.text
    stamps = r.json()["timestamps"]
    g2p = EspeakPhonemizer("en-us")
    frame_s = 600 / 24000
    assert [t["word"] for t in stamps] == ["Hello", "world"]
    hello = [c for c in g2p("Hello") if c in vocab]
    assert stamps[0]["start_time"] == pytest.approx(FRAMES * frame_s)
    assert stamps[0]["end_time"] - stamps[0]["start_time"] == pytest.approx(len(hello) * FRAMES * frame_s)
    assert stamps[1]["start_time"] == pytest.approx(stamps[0]["end_time"] + FRAMES * frame_s)  # the space
    audio_s = len(base64.b64decode(r.json()["audio"])) / 2 / 24000
    assert stamps[1]["end_time"] < audio_s

    log = "".join(srv.stderr)
    assert "NETGUARD" not in log, log[-2000:]


def test_missing_pth_refuses_to_start_naming_it(upstream_dir, tmp_path):
    """A layout without the weights is a deployment mistake: serve exits at once, naming the
    file and the layout (no model load, no port, no retry loop)."""
    model_dir, guard, _ = upstream_dir
    shutil.copyfile(model_dir / "config.json", tmp_path / "config.json")
    shutil.copytree(model_dir / "voices", tmp_path / "voices")
    env = {**os.environ, **_env(tmp_path, guard)}
    r = subprocess.run([sys.executable, "-m", "container", "serve", "--port", "0"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("container cannot start:"))
    assert "lacks *.pth (kokoro-v1_0.pth" in line and str(tmp_path) in line, line
    assert "config.json (" not in line and "voices/*.pt (" not in line  # only what is missing
    assert "NETGUARD" not in r.stderr


def test_checkpoint_that_does_not_match_config_is_refused(upstream_dir, tmp_path):
    """KModel itself would load it with strict=False and serve random noise without a word."""
    import torch

    from container.backends.torch_backend import TorchBackend
    from container.errors import ModelLoadError
    from container.settings import Settings

    model_dir, _, _ = upstream_dir
    sd = torch.load(model_dir / "kokoro-v1_0.pth", map_location="cpu", weights_only=True, mmap=True)
    dropped = next(iter(sd["decoder"]))
    del sd["decoder"][dropped]
    torch.save(sd, tmp_path / "kokoro-v1_0.pth")
    shutil.copyfile(model_dir / "config.json", tmp_path / "config.json")
    shutil.copytree(model_dir / "voices", tmp_path / "voices")
    backend = TorchBackend(Settings(backend="torch", model_dir=tmp_path))
    try:
        backend.init_framework()
        with pytest.raises(ModelLoadError, match=r"does not match config.json in decoder: 1 missing") as e:
            backend.load_weights()
    finally:
        # init_framework flushes denormals process-wide (right for a server, wrong for the rest of
        # this test process: hypothesis and numpy expect IEEE subnormals).
        torch.set_flush_denormal(False)
    assert dropped.removeprefix("module.") in str(e.value)


def test_torch_server_normalizes_segments_and_takes_kokoro_fastapi_fields(upstream_dir, torch_server):
    """The same normalization table, segmentation case and Kokoro-FastAPI fields as on the onnx
    backend (test_kokoro_fastapi.py), on the torch backend with the generated checkpoint; plus
    blends with subtraction, which this backend now mixes too, and /v1/audio/voices/combine's .pt."""
    import torch

    from tests.container.normalization_cases import CASES

    _, _, vocab = upstream_dir
    srv, d = torch_server  # its MODEL_DIR has a second voice, am_other, beside the module's
    url = srv.url
    with httpx.Client(base_url=url, timeout=120) as client:
        for options, text, spoken in CASES:
            got = client.post("/dev/phonemize", json={"text": text, "normalization_options": options}).json()
            assert got["normalized_text"] == spoken, (text, options)
            ref = client.post("/dev/phonemize", json={"text": spoken, "normalization_options": {"normalize": False}})
            assert got["phonemes"] == ref.json()["phonemes"]
            assert got["tokens"] == [vocab[c] for c in got["phonemes"]]

        # one segment, one NDJSON line, and no gap over 0.3 s between the words
        with client.stream("POST", "/dev/captioned_speech", json={
                "input": "Dr. Smith met Mr. Jones at 3 p.m. today.", "voice": VOICE, "response_format": "pcm"}) as r:
            assert r.status_code == 200
            lines = [json.loads(ln) for ln in r.iter_lines() if ln]
        assert len(lines) == 1
        stamps = lines[0]["timestamps"]
        assert [t["word"] for t in stamps] == ["Doctor", "Smith", "met", "Mister", "Jones", "at", "three", "PM",
                                               "today"]
        assert max(b["start_time"] - a["end_time"] for a, b in zip(stamps, stamps[1:], strict=False)) <= 0.3

        # every Kokoro-FastAPI field in one request; the audio length follows the fixed durations
        body = {"model": "kokoro", "input": "It costs $5.50.", "voice": f"{VOICE}(1)-am_other(0.3)",
                "response_format": "pcm", "speed": 2.0, "stream": False, "lang_code": "a",
                "volume_multiplier": 0.5, "normalization_options": {"normalize": True}, "timing_headers": True,
                "return_download_link": True, "download_format": "wav"}
        r = client.post("/v1/audio/speech", json=body)
        assert r.status_code == 200, r.text
        assert "warning" not in r.headers
        want = _expected_samples(["It costs five dollars and fifty cents."], vocab, FRAMES // 2)
        assert len(r.content) // 2 == want
        assert float(r.headers["x-audio-seconds"]) == pytest.approx(want / 24000, abs=0.002)
        kept = client.get(r.headers["x-download-path"])
        assert kept.status_code == 200 and kept.content[:4] == b"RIFF" and (len(kept.content) - 44) // 2 == want
        # The gain (volume_multiplier 0.5) is the engine's, whatever the backend: checked exactly
        # on sine in tests/container/routes/openai/test_kokoro_fastapi.py, without a second run here.

        # combine: upstream's .pt, the same mix the speech route uses
        c = client.post("/v1/audio/voices/combine", json=f"{VOICE}-am_other")
        assert c.status_code == 200, c.text
        assert c.headers["x-voice-id"] == f"{VOICE}(0.5000)-am_other(0.5000)" and "warning" not in c.headers
        mixed = torch.load(io.BytesIO(c.content), weights_only=True)
        a = torch.load(d / "voices" / f"{VOICE}.pt", weights_only=True)
        b = torch.load(d / "voices" / "am_other.pt", weights_only=True)
        assert torch.allclose(mixed, 0.5 * a - 0.5 * b, atol=1e-6)

        # phonemes as given
        ps = client.post("/dev/phonemize", json={"text": "Hello world."}).json()["phonemes"]
        g = client.post("/dev/generate_from_phonemes", json={"phonemes": ps, "voice": VOICE, "response_format": "pcm"})
        assert g.status_code == 200 and len(g.content) // 2 == (len(ps) + 2) * FRAMES * SAMPLES_PER_FRAME


def test_weight_norm_folding_is_exact(torch_backend, torch_model_dir):
    """Folding the decoder's weight_norm once (load_weights does) must not change a single sample:
    the session's loaded backend against KModel as upstream builds it from the same files."""
    import torch
    from kokoro import KModel

    from tests.container.conftest import torch_process_settings

    backend = torch_backend
    with torch_process_settings():
        backend.init_framework()
        assert backend.parallel_runs == 1 and backend.width_matters is False
        assert not backend.pack_segments
        p = backend.prepare("Hello there.", VOICE, 1.0)
        torch.manual_seed(7)  # the decoder's source adds noise
        folded = backend.infer([p], threads=1)[0]
        ref_model = KModel(repo_id="hexgrad/Kokoro-82M", config=str(torch_model_dir / "config.json"),
                           model=str(torch_model_dir / "kokoro-v1_0.pth")).eval()
        assert backend.local.fold_weight_norm() == 0  # nothing left to fold
        unfolded_hooks = sum(type(h).__name__ == "WeightNorm" for m in ref_model.modules()
                             for h in m._forward_pre_hooks.values())
        assert unfolded_hooks == 89
        table = backend.local.style[VOICE]
        torch.manual_seed(7)
        with torch.inference_mode():
            want = ref_model(p.payload, table[len(p.payload) - 1], 1.0).numpy()
    assert folded.shape == want.shape and float(abs(folded - want).max()) == 0.0
