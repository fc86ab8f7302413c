"""The container's settings read from the environment (container/settings.py)."""
import pytest

from container.settings import Settings


def test_settings_parse_weights_from_env(monkeypatch):
    monkeypatch.setenv("PRESSURE_WEIGHTS", "0.5, 0.3,0.2")
    monkeypatch.setenv("QUEUE_MAX_DEPTH", "7")
    s = Settings()
    assert s.pressure_weights == (0.5, 0.3, 0.2)
    assert s.queue_max_depth == 7 and s.slo_ms == 3000 and s.port == 8080
    monkeypatch.setenv("PRESSURE_WEIGHTS", "1,2")
    with pytest.raises(ValueError):
        Settings()


def test_torch_settings_layout_values():
    assert Settings().torch_streams == "auto" and Settings().torch_device == "auto"
    assert Settings(torch_streams="6").torch_streams == 6
    with pytest.raises(ValueError):
        Settings(torch_streams=0)
    with pytest.raises(ValueError):
        Settings(torch_device="tpu")


def test_settings_read_the_tables_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_VOICES", "alloy=jm_kumo")
    monkeypatch.setenv("OPENAI_MODELS", "tts-1, my-model")
    monkeypatch.setenv("MAX_TEXT_CHARS", "10000")
    s = Settings()
    assert s.openai_voices == {"alloy": ("jm_kumo",)} and s.openai_models == ("tts-1", "my-model")
    assert s.max_body_bytes == 12 * 10000 + 4096  # derived from MAX_TEXT_CHARS
    monkeypatch.setenv("MAX_BODY_BYTES", "2048")
    assert Settings().max_body_bytes == 2048
    monkeypatch.setenv("OPENAI_VOICES", "nonsense")
    with pytest.raises(ValueError):
        Settings()
