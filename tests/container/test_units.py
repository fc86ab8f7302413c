import json
import struct

import pytest

from container.audio import wav_header
from container.engine import segment_deadline
from container.markers import STAGES, parse_stage_line, stage_record
from container.metrics import emf_record, percentile, pressure_index
from container.settings import Settings
from container.text import pack_segments, split_segments


def test_pressure_index_bounds_and_weights():
    assert pressure_index(0, 10, 0, 50, 0) == 0
    assert pressure_index(100, 10, 500, 50, 1.0) == 100  # every part clipped to 1
    # only the queue part at half: 0.4 * 0.5 / 1.0
    assert pressure_index(0, 10, 25, 50, 0, (0.4, 0.4, 0.2)) == pytest.approx(20.0)
    # weights are normalised: (2, 2, 1) is the same as (0.4, 0.4, 0.2)
    assert pressure_index(5, 10, 10, 50, 0.5, (2, 2, 1)) == pytest.approx(
        pressure_index(5, 10, 10, 50, 0.5, (0.4, 0.4, 0.2)))
    assert pressure_index(10, 10, 0, 50, 0, (1, 0, 0)) == 100
    with pytest.raises(ValueError):
        pressure_index(1, 1, 1, 1, 1, (0, 0, 0))


def test_pressure_index_monotonic_in_each_input():
    base = pressure_index(3, 10, 10, 50, 0.1)
    assert pressure_index(4, 10, 10, 50, 0.1) > base
    assert pressure_index(3, 10, 11, 50, 0.1) > base
    assert pressure_index(3, 10, 10, 50, 0.2) > base


def test_settings_parse_weights_from_env(monkeypatch):
    monkeypatch.setenv("PRESSURE_WEIGHTS", "0.5, 0.3,0.2")
    monkeypatch.setenv("QUEUE_MAX_DEPTH", "7")
    s = Settings()
    assert s.pressure_weights == (0.5, 0.3, 0.2)
    assert s.queue_max_depth == 7 and s.slo_ms == 3000 and s.port == 8080
    monkeypatch.setenv("PRESSURE_WEIGHTS", "1,2")
    with pytest.raises(ValueError):
        Settings()


def test_stage_marker_roundtrip():
    rec = stage_record("weights_ready")
    line = json.dumps(rec)
    parsed = parse_stage_line(line)
    assert parsed == rec
    assert set(parsed) == {"event", "stage", "at", "elapsed_s"}
    assert parsed["at"].endswith("Z")
    assert STAGES[0] == "container_started" and STAGES[-1] == "ready"


@pytest.mark.parametrize("line", [
    "", "INFO uvicorn started", '{"event": "other"}', "{not json",
    '{"event": "stage", "stage": "ready", "at": "2024-01-01T00:00:00", "elapsed_s": 1}',
    '{"event": "stage", "stage": "ready", "at": "2024-01-01T00:00:00.1Z", "elapsed_s": "1"}',
    '{"event": "stage", "stage": "loading", "at": "2024-01-01T00:00:00.1Z", "elapsed_s": 1}',
])
def test_parse_stage_line_rejects_other_lines(line):
    assert parse_stage_line(line) is None


def test_wav_header_streaming_and_sized():
    h = wav_header(None)
    assert len(h) == 44 and h[:4] == b"RIFF" and h[8:12] == b"WAVE"
    assert struct.unpack("<I", h[40:44])[0] == 0xFFFFFFFF
    h = wav_header(480)
    assert struct.unpack("<I", h[4:8])[0] == 36 + 480
    assert struct.unpack("<I", h[24:28])[0] == 24000
    assert struct.unpack("<I", h[40:44])[0] == 480


def test_split_segments():
    assert split_segments("One. Two! Three?") == ["One.", "Two!", "Three?"]
    long = ", ".join(["word " * 10] * 10)
    segs = split_segments(long, max_chars=120)
    assert all(len(s) <= 120 for s in segs) and len(segs) > 1
    assert " ".join(segs).split() == long.split()  # no word lost or cut
    assert all(s.endswith(",") for s in segs[:-1])  # cut at the clause marks first
    assert split_segments("x" * 250, max_chars=100) == ["x" * 100, "x" * 100, "x" * 50]
    assert split_segments("   ") == []


def test_pack_segments_joins_in_order_within_the_limit():
    segs = split_segments("One. Two! Three? " + "y" * 30)
    assert pack_segments(segs, max_chars=15) == ["One. Two!", "Three?", "y" * 30]
    assert pack_segments(segs, max_chars=16) == ["One. Two! Three?", "y" * 30]
    assert pack_segments(segs, max_chars=300) == ["One. Two! Three? " + "y" * 30]
    assert pack_segments([], 10) == []
    # A segment over the limit is never merged, nor split (split_segments already bounds it).
    assert pack_segments(["a" * 20, "b"], max_chars=10) == ["a" * 20, "b"]


def test_torch_settings_layout_values():
    assert Settings().torch_streams == "auto" and Settings().torch_device == "auto"
    assert Settings(torch_streams="6").torch_streams == 6
    with pytest.raises(ValueError):
        Settings(torch_streams=0)
    with pytest.raises(ValueError):
        Settings(torch_device="tpu")


def test_deadline_orders_first_segments_before_tails():
    # A request arriving 1 s later still has its first segment due before an earlier one's 3rd.
    early_third = segment_deadline(0.0, 3.0, audio_before_s=6.0)
    late_first = segment_deadline(1.0, 3.0, audio_before_s=0.0)
    assert late_first < early_third


def test_percentile_and_emf_shape():
    assert percentile([], 95) is None
    assert percentile(list(range(1, 101)), 95) == 95
    dims = {"EndpointName": "dev-m", "VariantName": "AllTraffic", "Model": "m"}
    rec = emf_record(dims, {"QueueDepth": 3, "TTFABp95": 12.5}, {"TTFABp95": "Milliseconds"}, ts=1.0)
    cw = rec["_aws"]["CloudWatchMetrics"][0]
    assert cw["Namespace"] == "SpeechEndpoints/Container"
    assert cw["Dimensions"] == [["EndpointName", "VariantName", "Model"]]
    assert rec["Model"] == "m" and rec["EndpointName"] == "dev-m" and rec["VariantName"] == "AllTraffic"
    assert rec["QueueDepth"] == 3 and rec["_aws"]["Timestamp"] == 1000


def test_emf_lines_carry_the_endpoint_and_variant_from_the_environment(monkeypatch):
    """The program sets ENDPOINT_NAME / VARIANT_NAME on the Model; every EMF line carries them."""
    import io
    import json

    from container import telemetry
    from container.app import State
    from container.settings import Settings

    monkeypatch.setenv(telemetry.ENV_ENDPOINT, "prod-kokoro-82m")
    monkeypatch.setenv(telemetry.ENV_VARIANT, "Canary")
    settings = Settings(model_name="kokoro-82m")
    state = State(settings)
    state.metrics.stream = io.StringIO()
    state.metrics.record_ttfab(80.0)
    state.metrics.record_service(40.0)
    rec = json.loads(state.metrics.flush() and state.metrics.stream.getvalue())
    cw = rec["_aws"]["CloudWatchMetrics"][0]
    assert cw["Dimensions"] == [list(telemetry.DIMENSIONS)]
    assert {k: rec[k] for k in telemetry.DIMENSIONS} == {
        "EndpointName": "prod-kokoro-82m", "VariantName": "Canary", "Model": "kokoro-82m"}
    assert rec[telemetry.SERVICE_P95] == 40.0 and rec[telemetry.TTFAB_P95] == 80.0
    monkeypatch.delenv(telemetry.ENV_ENDPOINT)
    assert Settings().endpoint_name == telemetry.LOCAL_ENDPOINT
