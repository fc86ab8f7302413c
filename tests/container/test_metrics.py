"""The pressure index, percentiles and the EMF lines (container/metrics.py, container/telemetry.py)."""
import json

import pytest

from container.metrics import emf_record, percentile, pressure_index
from container.settings import Settings


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

    from container import telemetry
    from container.app import State

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
