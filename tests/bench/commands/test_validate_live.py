"""``bench validate --url --live`` against bench.load.synthetic of known capacity (its own process).

The server serves one request at a time in SERVICE_MS with a 503 queue_saturated gate, so a closed
loop of N sees p95 TTFAB of about N x SERVICE_MS. SLO_MS leaves 25 % between the gate's worst case
(GATE x SERVICE_MS) and the SLO, so a busy 2-core machine does not turn a pass into a fail.
"""

from __future__ import annotations

import json

import pytest

from bench.cli.main import main
from bench.load.synthetic import SyntheticServer
from speech.files import load_artifact, write_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint, LadderLevel, Provenance, QmaxArtifact, ServiceTime, Slo, TtotalArtifact
from speech.schema.config import PlanInputs

from ..conftest import REF

SERVICE_MS = 40.0
SLO_MS = 400.0
GATE = 8  # the server's capacity: floor(SLO / S) = 10 would fit, the gate admits 8
FP = Fingerprint.of("local", "sha256:" + "cd" * 32)
WINDOW = ["--settle-s", "0.5", "--measure-s", "2"]


def _plan(service_ms: float, q_max: int, tmp_path) -> str:
    """The plan bench qmax + bench plan would write for a one-at-a-time server of ``service_ms``
    gated at ``q_max``: levels up to q_max meet the SLO, one past it is rejected by the gate."""
    levels = sorted({1, 2, 4, q_max // 2, q_max})
    ladder = [
        LadderLevel(concurrency=c, completed=100, ok=100, ttfab_p50_ms=c * service_ms * 0.9,
                    ttfab_p95_ms=c * service_ms, ttfab_p99_ms=c * service_ms * 1.02,
                    throughput_rps=1000 / service_ms, client_concurrency_mean=float(c), meets_slo=True)
        for c in levels
    ]
    ladder.append(LadderLevel(concurrency=q_max + 1, completed=100, ok=60, rejected=40, ttfab_p50_ms=q_max * service_ms * 0.9,
                              ttfab_p95_ms=q_max * service_ms, ttfab_p99_ms=q_max * service_ms * 1.02,
                              throughput_rps=1000 / service_ms, client_concurrency_mean=float(q_max + 1), meets_slo=False))
    q = QmaxArtifact(model="kokoro-82m", transport="stream", fingerprint=FP, slo=Slo(ttfab_p95_ms=SLO_MS), ladder=ladder,
                     q_max=q_max, bracketed=True, first_failing_concurrency=q_max + 1,
                     service_time=ServiceTime(mean_ms=service_ms, p95_ms=service_ms * 1.05), instances=1,
                     cloudwatch_ratio=1.0, cloudwatch_ratio_source="not_applicable",
                     provenance=Provenance(origin="assumption", source="test: known-capacity ladder"))
    t = load_artifact(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact)
    plan = build_plan(q, t.model_copy(update={"fingerprint": FP}),
                      # The surge rule's target, 0.75 x Q_max, set as a tuned share: validate checks the plan's
                      # own C_scale_max, whichever rule set it.
                      PlanInputs(slo_ms=SLO_MS, surge_ratio=1.25, peak_rps=50, trough_rps=5, min_instances=1,
                                 target_share=0.75))
    assert plan.q_max == q_max and plan.queue_max_depth == q_max
    return str(write_artifact(tmp_path / f"plan-q{q_max}.json", plan))


def _validate(capsys, plan_file: str, url: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(["validate", "--plan", plan_file, "--url", url, "--live", "--mix", "short", *WINDOW, "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_live_passes_when_the_plan_matches_the_server(tmp_path, capsys):
    plan_file = _plan(SERVICE_MS, GATE, tmp_path)  # C_scale_max 6: checks at 5 and at 9 in flight
    with SyntheticServer(service_ms=SERVICE_MS, queue_max=GATE) as s:
        rc, out = _validate(capsys, plan_file, s.url)
    assert out["issues"] == [] and out["ok"] is True and rc == 0
    ok, gate = out["live"]
    assert ok["concurrency"] == 5 and ok["rejected"] == 0 and ok["errors"] == 0
    # A closed loop of 5 on a one-at-a-time server: about 5 x S, far from the SLO.
    assert 4 * SERVICE_MS <= ok["p95_ms"] < SLO_MS
    # One past the gate: the 9th request is turned away, the 8 admitted ones keep the SLO.
    assert gate["concurrency"] == GATE + 1 and gate["rejected"] > 0
    assert (GATE - 1) * SERVICE_MS <= gate["p95_ms"] <= SLO_MS


@pytest.mark.slow
def test_live_fails_when_the_plan_overstates_the_server(tmp_path, capsys):
    # Planned on a server 4x as fast: Q_max 40, C_scale_max 30. The container enforces the plan's
    # queue depth, as the program deploys it, but this server sustains only 10 within the SLO.
    plan_file = _plan(SERVICE_MS / 4, 40, tmp_path)
    with SyntheticServer(service_ms=SERVICE_MS, queue_max=40) as s:
        rc, out = _validate(capsys, plan_file, s.url)
    assert rc == 1 and out["ok"] is False
    ok, gate = out["live"]
    assert ok["concurrency"] == 24 and ok["p95_ms"] > 2 * SLO_MS
    assert gate["concurrency"] == 44 and gate["rejected"] > 0 and gate["p95_ms"] > 2 * SLO_MS
    at_target, past_qmax = [i["message"] for i in out["issues"]]
    assert f"local server {s.url} at 24 in flight (0.8 x C_scale_max 30)" in at_target
    assert f"p95 TTFAB {ok['p95_ms']:.0f} ms" in at_target and "within the SLO 400 ms" in at_target
    assert "fix: the plan (local-cdcdcdcd, Q_max 40) overstates" in at_target and "bench qmax" in at_target
    assert "at 44 in flight (past Q_max 40): admitted requests had" in past_qmax
    assert f"p95 TTFAB {gate['p95_ms']:.0f} ms" in past_qmax and "SLO 400 ms" in past_qmax


@pytest.mark.slow
def test_live_names_a_missing_gate(tmp_path, capsys):
    plan_file = _plan(SERVICE_MS, GATE, tmp_path)
    with SyntheticServer(service_ms=SERVICE_MS) as s:  # no admission gate: queues without bound
        rc, out = _validate(capsys, plan_file, s.url)
    assert rc == 1
    msgs = [i["message"] for i in out["issues"]]
    assert any(f"at {GATE + 1} in flight (past Q_max {GATE}) rejected nothing" in m
               and f"QUEUE_MAX_DEPTH={GATE}" in m for m in msgs), msgs


@pytest.mark.parametrize("argv,needle", [
    (["--url", "http://127.0.0.1:9"], "--url has no policy to compare"),
    (["--url", "http://127.0.0.1:9", "--live", "--measure-s", "0"], "--measure-s 0"),
])
def test_live_bad_input_exit_2(tmp_path, capsys, argv, needle):
    plan_file = _plan(SERVICE_MS, GATE, tmp_path)
    rc = main(["validate", "--plan", plan_file, *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
