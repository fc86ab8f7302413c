"""The stage markers a copy prints while it starts (container/markers.py)."""
import json

import pytest

from container.markers import STAGES, parse_stage_line, stage_record


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
