"""Text normalization (container/normalize.py), sentence segmentation (container/text.py), voice
arithmetic and the download store: the pure parts of the Kokoro-FastAPI compatibility work.
The same table runs through real servers on both backends in routes/openai/test_kokoro_fastapi.py
and backends/test_torch_backend.py."""
from __future__ import annotations

import os
import time

import pytest

from container.downloads import DownloadStore
from container.normalize import normalize
from container.protocol import NormalizationOptions
from container.text import sentences, split_phonemes, split_segments
from container.voices import parse_voice_spec, resolve_voice
from tests.container.normalization_cases import CASES


@pytest.mark.parametrize(("options", "text", "spoken"), CASES, ids=[c[1][:40] for c in CASES])
def test_normalization_table(options, text, spoken):
    assert normalize(text, NormalizationOptions(**options)) == spoken


def test_defaults_are_kokoro_fastapis():
    o = NormalizationOptions()
    assert (o.normalize, o.unit_normalization, o.url_normalization, o.email_normalization,
            o.optional_pluralization_normalization, o.phone_normalization, o.replace_remaining_symbols) == (
        True, False, True, True, True, True, True)
    assert normalize("Dr. Smith paid $5.50.") == normalize("Dr. Smith paid $5.50.", o)


@pytest.mark.parametrize(("text", "want"), [
    ("Dr. Smith met Mr. Jones at 3 p.m. today.", ["Dr. Smith met Mr. Jones at 3 p.m. today."]),
    ("It cost $5.50, i.e. a lot! Really? Pi is 3.14.", ["It cost $5.50, i.e. a lot!", "Really?", "Pi is 3.14."]),
    ("The U.S. economy grew 3.5% in Jan. 2024. Next.", ["The U.S. economy grew 3.5% in Jan. 2024.", "Next."]),
    ("A list\nwithout stops\n\nThird line.", ["A list", "without stops", "Third line."]),
    ("One. Two! Three?", ["One.", "Two!", "Three?"]),
])
def test_sentences_know_abbreviations_and_decimals(text, want):
    assert list(sentences(text)) == want


def test_windowed_segmentation_matches_one_pass_and_streams():
    """The window only bounds pysbd's cost; the sentences are the ones a single call finds."""
    import pysbd

    para = ("Dr. Smith met Mr. Jones at 3 p.m. today. It cost $5.50, i.e. a lot! The U.S. economy "
            "grew 3.5% in Jan. 2024. Streaming speech starts playing before the whole text is spoken. ")
    text = para * 20
    one_pass = [s.strip() for s in pysbd.Segmenter(language="en", clean=False).segment(text) if s.strip()]
    assert list(sentences(text)) == one_pass
    assert list(sentences(text, window=60)) == one_pass  # windows smaller than a sentence
    # a sentence longer than the window and than max_chars is still cut by split_segments
    long = "word " * 200 + "end."
    assert all(len(s) <= 120 for s in split_segments(long, 120))


def test_split_phonemes_cuts_after_stops_and_within_the_limit():
    ps = "həlˈO wˈɜːld. hˌW ɑːɹ juː? " + "ab " * 200
    parts = split_phonemes(ps, 100)
    assert parts[0] == "həlˈO wˈɜːld." and parts[1] == "hˌW ɑːɹ juː?"
    assert all(len(p) <= 100 for p in parts) and "".join(parts).replace(" ", "") == ps.replace(" ", "")


def test_voice_subtraction_as_kokoro_fastapi():
    spec = parse_voice_spec("a(1)-b(0.3)")
    assert [n for n, _ in spec.parts] == ["a", "b"]
    (_, wa), (_, wb) = spec.parts
    assert wa == pytest.approx(1 / 1.3) and wb == pytest.approx(-0.3 / 1.3)
    assert parse_voice_spec(spec.canonical).canonical == spec.canonical  # the id round-trips
    kw = dict(available=("jf_alpha", "jm_kumo", "my-voice"), aliases={"alloy": "jf_alpha"}, fallback=None,
              blends=True)
    assert resolve_voice("alloy-jm_kumo", **kw) == "jf_alpha(0.5000)-jm_kumo(0.5000)"
    assert resolve_voice("my-voice", **kw) == "my-voice"  # a name with a '-' is a voice
    from container.errors import BadRequest
    for bad in ("-jf_alpha", "jf_alpha--jm_kumo", "jf_alpha+", "jf_alpha jm_kumo"):
        with pytest.raises(BadRequest):
            resolve_voice(bad, **kw)


def test_download_store_is_bounded_and_serves_only_its_names(tmp_path):
    store = DownloadStore(tmp_path / "dl", max_files=3, max_bytes=10_000, ttl_s=60)
    names = []
    for i in range(5):
        d = store.reserve("wav")
        store.put(d.name, bytes(1000 + i))
        names.append(d.name)
        os.utime(store.directory / d.name, (time.time() - 10 + i, time.time() - 10 + i))
    kept = sorted(p.name for p in (tmp_path / "dl").iterdir())
    assert kept == sorted(names[-3:])  # the oldest went first
    assert store.find(names[-1]) is not None and store.find(names[0]) is None
    for bad in ("../etc/passwd", "speech-x.wav", names[-1] + "/..", "speech-" + "0" * 32 + ".exe", ""):
        assert store.find(bad) is None
    store.put(store.reserve("mp3").name, bytes(9_500))  # over max_bytes: older files make room
    assert sum(p.stat().st_size for p in (tmp_path / "dl").iterdir()) <= 10_000
    old = store.reserve("wav")
    store.put(old.name, b"x")
    os.utime(store.directory / old.name, (time.time() - 120, time.time() - 120))
    assert store.find(old.name) is None  # past DOWNLOAD_TTL_S
    temp = DownloadStore(None, 3, 10_000, 60)
    d = temp.directory
    temp.close()
    assert not d.exists()  # a directory it made is removed at shutdown


def test_a_rule_that_cannot_read_a_match_leaves_it_as_written():
    """num2words stops below 10**306: such a number is left to espeak, never a failed request."""
    huge = "9" * 400
    assert normalize(f"It is {huge} and 5.") == f"It is {huge} and five."
    assert huge in normalize("$" + huge)
