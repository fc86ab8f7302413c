"""Issue 36: --threshold, --csv and --html on every command that measures or simulates; the exit
code of a broken threshold (3), the CSV read back and the HTML parsed."""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.cli.thresholds import EXIT_THRESHOLD, Metric, judge, parser_for

from ..commands.test_observe import activities, setup  # noqa: F401  (bench observe's moto fixtures)

ROOT = Path(__file__).resolve().parents[3]
REF = ROOT / "artifacts" / "reference"
QMAX = str(REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json")
TTOTAL = str(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json")
TRACE = "diurnal:peak=200,trough=10,hours=1,seed=1"


class _Page(HTMLParser):
    """Collects what a reader sees: tags, the text, images with inline data."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.images.append(a.get("src", ""))

    def handle_data(self, data):
        if data.strip():
            self.text.append(data.strip())


def parse_html(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- the parser and the judge ---------------------------------------------------------------------

METRICS = [Metric("within_slo_share", "share"), Metric("ttfab_p95_ms", "p95"), Metric("q_max", "Q_max")]


@pytest.mark.parametrize("text, metric, op, value", [
    ("within_slo_share>=0.995", "within_slo_share", ">=", 0.995),
    (" ttfab_p95_ms < 2500 ", "ttfab_p95_ms", "<", 2500.0),
    ("within_slo_share >= 99.5%", "within_slo_share", ">=", 0.995),
    ("q_max=4", "q_max", "==", 4.0),
    ("q_max != 0", "q_max", "!=", 0.0),
])
def test_threshold_syntax(text, metric, op, value):
    t = parser_for(METRICS)(text)
    assert (t.metric, t.op) == (metric, op) and t.value == pytest.approx(value)


@pytest.mark.parametrize("text, needle", [
    ("within_slo_share", "not METRIC OP VALUE"), ("p95<2500", "no metric 'p95'"), ("q_max >= lots", "not METRIC OP VALUE"),
    ("ttfab_p95 < 3", "did you mean ttfab_p95_ms"),
])
def test_bad_thresholds_are_refused_with_the_metrics(text, needle):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError) as err:
        parser_for(METRICS)(text)
    assert needle in str(err.value) and "within_slo_share" in str(err.value)


def test_judge_says_by_how_much_and_a_missing_value_breaks():
    p = parser_for(METRICS)
    v = judge([p("within_slo_share>=0.995"), p("ttfab_p95_ms<2500"), p("q_max>=1")],
              {"within_slo_share": 0.97, "ttfab_p95_ms": 1200.0, "q_max": None})
    assert [x.passed for x in v] == [False, True, False]
    assert v[0].miss == pytest.approx(0.025) and "misses by 0.025" in v[0].line()
    assert "no value" in v[2].line()


def test_a_bad_threshold_on_the_command_line_is_exit_2(capsys):
    rc = main(["plan", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "200", "--threshold", "nope>1"])
    err = capsys.readouterr().err
    assert rc == 2 and "no metric 'nope'" in err and len(err.strip().splitlines()) == 1


# --- per command: a broken threshold exits 3 and names it; --csv and --html readable ----------------

def test_plan_threshold_csv_html(tmp_path, capsys):
    html = tmp_path / "r" / "plan.html"
    rc = main(["plan", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "200", "--trough-rps", "10",
               "--allow-config-mismatch", "--out", str(tmp_path), "--threshold", "max_instances<=3",
               "--threshold", "stop_findings==0", "--csv", str(tmp_path / "csv"), "--html", str(html)])
    out, err = capsys.readouterr()
    assert rc == EXIT_THRESHOLD
    assert "ThresholdBroken: 1 of 2 thresholds broken: max_instances <= 3: max_instances = 12, misses by 9" in err
    assert "[ok  ] stop_findings == 0" in out
    rows = read_csv(tmp_path / "csv" / "plan-numbers.csv")
    assert {r["name"] for r in rows} >= {"Q_max", "C_scale_max", "max_instances"}
    summary = {r["metric"]: r["value"] for r in read_csv(tmp_path / "csv" / "plan-summary.csv")}
    assert summary["max_instances"] == "12"
    page = parse_html(html)
    assert "table" in page.tags and "thresholds" in page.ids and any("THRESHOLDS BROKEN" in t for t in page.text)


def test_plan_threshold_broken_under_json_is_one_object(tmp_path, capsys):
    rc = main(["plan", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "200", "--trough-rps", "10",
               "--allow-config-mismatch", "--out", str(tmp_path), "--json", "--threshold", "max_instances<=3"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == EXIT_THRESHOLD and doc["kind"] == "plan"
    assert doc["error"]["type"] == "ThresholdBroken" and doc["error"]["exit_code"] == EXIT_THRESHOLD
    [t] = doc["thresholds"]
    assert t["threshold"] == "max_instances<=3" and t["passed"] is False and t["actual"] == 12 and t["miss"] == 9


def test_passing_thresholds_exit_0(tmp_path, capsys):
    rc = main(["plan", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "200", "--trough-rps", "10",
               "--allow-config-mismatch", "--out", str(tmp_path), "--threshold", "max_instances<=20"])
    assert rc == 0 and "[ok  ] max_instances <= 20" in capsys.readouterr().out


def _check_outputs(tmp_path: Path, command: str, tables: list[str]) -> _Page:
    """Every CSV the command wrote reads back with its header; the HTML parses, embeds its images."""
    for t in ["summary", *tables]:
        rows = read_csv(tmp_path / "csv" / f"{command}-{t}.csv")
        assert rows, t
    page = parse_html(tmp_path / f"{command}.html")
    assert "answer" in page.ids and "table" in page.tags
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    return page


def _outputs(tmp_path: Path, command: str) -> list[str]:
    return ["--csv", str(tmp_path / "csv"), "--html", str(tmp_path / f"{command}.html")]


def test_qmax(synthetic_40ms, tmp_path, capsys):
    rc = main(["qmax", "--url", synthetic_40ms.url, "--slo-ms", "340", "--levels", "1,4,16", "--no-refine",
               "--settle-s", "0", "--measure-s", "0.6", "--out", str(tmp_path), "--threshold", "q_max>=64",
               *_outputs(tmp_path, "qmax")])
    err = capsys.readouterr().err
    # 4 on a quiet machine; 1 where load pushed the p95 at 4 in flight past 340 ms (16 cannot meet it)
    assert rc == EXIT_THRESHOLD and re.search(r"q_max >= 64: q_max = (4, misses by 60|1, misses by 63)", err), err
    levels = read_csv(tmp_path / "csv" / "qmax-levels.csv")
    assert [int(r["concurrency"]) for r in levels] == [1, 4, 16] and float(levels[0]["ttfab_p95_ms"]) > 0
    assert len(_check_outputs(tmp_path, "qmax", ["levels"]).images) == 1


@pytest.mark.slow
def test_ttotal(synthetic_40ms, ref_artifacts, tmp_path, capsys):
    from bench.load.targets import HttpTarget
    from speech.files import write_artifact

    t = HttpTarget(synthetic_40ms.url)
    t.check()
    q = ref_artifacts[0].model_copy(update={"fingerprint": t.fingerprint()})
    qf = write_artifact(tmp_path / "q.json", q)
    import sys

    serve = f"{sys.executable} -m bench.load.synthetic --service-ms 40 --startup-s 0.4"
    rc = main(["ttotal", "--qmax", str(qf), "--url", synthetic_40ms.url, "--serve-cmd", serve, "--out", str(tmp_path),
               "--threshold", "t_total_s<0.001", *_outputs(tmp_path, "ttotal")])
    assert rc == EXIT_THRESHOLD and "t_total_s < 0.001" in capsys.readouterr().err
    phases = read_csv(tmp_path / "csv" / "ttotal-phases.csv")
    assert phases[0]["phase"] == "desired_set"
    assert len(_check_outputs(tmp_path, "ttotal", ["phases"]).images) == 1


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_simulate(tmp_path, capsys):
    rc = main(["simulate", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "200", "--trough-rps", "10",
               "--trace", "steady:rps=50,duration=600", "--policies", "plan,floor", "--out", str(tmp_path),
               "--threshold", "within_slo_share>=0.9", "--threshold", "instance_hours<0.01", *_outputs(tmp_path, "simulate")])
    err = capsys.readouterr().err
    assert rc == EXIT_THRESHOLD and "1 of 2 thresholds broken: instance_hours < 0.01" in err
    policies = read_csv(tmp_path / "csv" / "simulate-policies.csv")
    assert [r["policy"] for r in policies] == ["plan", "floor"]
    minutes = read_csv(tmp_path / "csv" / "simulate-minutes.csv")
    assert len(minutes) == 2 * 10 and {"offered", "rejected", "serving_mean", "ttfab_p95_ms"} <= set(minutes[0])
    assert len(_check_outputs(tmp_path, "simulate", ["policies", "minutes"]).images) == 2


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_tune(tmp_path, capsys):
    # One tune for both: --json with a broken threshold, and the CSV and HTML written beside it (a
    # threshold decides the exit code only; it must not keep the files from being written).
    rc = main(["tune", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "200", "--trough-rps", "10", "--trace", TRACE,
               "--train-days", "1", "--holdout-days", "1", "--out", str(tmp_path), "--no-progress", "--json",
               "--threshold", "instance_hours_vs_seed<0.1", *_outputs(tmp_path, "tune")])
    doc = json.loads(capsys.readouterr().out)
    assert rc in (EXIT_THRESHOLD, 1) and doc["kind"] == "tune"
    [t] = doc["thresholds"]
    assert t["metric"] == "instance_hours_vs_seed" and not t["passed"] and t["actual"] > 0.1
    if rc == EXIT_THRESHOLD:
        assert doc["error"]["exit_code"] == EXIT_THRESHOLD
    knobs = read_csv(tmp_path / "csv" / "tune-knobs.csv")
    assert {"knob", "seed", "tuned", "reason"} == set(knobs[0])
    _check_outputs(tmp_path, "tune", ["knobs", "checks"])


def test_replay(synthetic_40ms, tmp_path, capsys):
    rc = main(["replay", "--url", synthetic_40ms.url, "--trace", "steady:rps=4,duration=3", "--slo-ms", "1000",
               "--out", str(tmp_path), "--threshold", "within_slo_share>=0.5", "--threshold", "ttfab_p95_ms<1",
               *_outputs(tmp_path, "replay")])
    err = capsys.readouterr().err
    assert rc == EXIT_THRESHOLD and "ttfab_p95_ms < 1: ttfab_p95_ms = " in err and "within_slo_share" not in err
    requests = read_csv(tmp_path / "csv" / "replay-requests.csv")
    assert len(requests) >= 8 and {r["status"] for r in requests} <= {"ok", "rejected"} | {r["status"] for r in requests}
    assert all(float(r["ttfab_ms"]) > 0 for r in requests if r["status"] == "ok")
    assert len(_check_outputs(tmp_path, "replay", ["requests"]).images) == 1


@pytest.mark.slow  # a synthetic server process and two live load levels
def test_validate(tmp_path, capsys):
    from bench.load.synthetic import SyntheticServer

    from ..commands.test_validate_live import SERVICE_MS, _plan

    plan_file = _plan(SERVICE_MS, 8, tmp_path)
    with SyntheticServer(service_ms=SERVICE_MS, queue_max=8) as s:
        rc = main(["validate", "--plan", plan_file, "--url", s.url, "--live", "--mix", "short",
                   # a short window: the threshold, the CSV and the HTML are checked here, not the live verdict
                   "--settle-s", "0.2", "--measure-s", "0.6", "--threshold", "live_p95_ms<1", *_outputs(tmp_path, "validate")])
    got = capsys.readouterr()
    # 1 when the busy machine also failed a live check (the command's own failure wins), else 3
    assert rc in (EXIT_THRESHOLD, 1) and "live_p95_ms < 1: live_p95_ms = " in got.err + got.out
    live = read_csv(tmp_path / "csv" / "validate-live.csv")
    assert [r["check"] for r in live] == ["0.8 x C_scale_max", "past Q_max"]
    _check_outputs(tmp_path, "validate", ["live"])


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_observe(setup, tmp_path, capsys):  # noqa: F811
    from ..commands.test_observe import activity, emf_history

    sess, plan, pf, qf, arts, listed = setup
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=1000, rejected=0)  # a plan that holds
    listed.append(activity(30, 2, "scale-out"))
    rc = main(["observe", "--plan", str(pf), "--endpoint", "test-kokoro-82m", "--since", "1h", "--artifacts", str(arts),
               "--out", str(tmp_path / "out"), "--threshold", "rejected_share>=0.01", *_outputs(tmp_path, "observe")])
    err = capsys.readouterr().err
    assert rc == EXIT_THRESHOLD and "rejected_share >= 0.01: rejected_share = 0, misses by 0.01" in err
    _check_outputs(tmp_path, "observe", ["occupancy"])


@pytest.mark.slow
def test_tcopy(tmp_path, capsys):
    import sys

    from tests.container.conftest import ServerProc

    srv = ServerProc({"BACKEND": "sine"})
    try:
        srv.wait_ready(timeout=60)
        rc = main(["tcopy", "--url", srv.url, "--serve-cmd", f"env BACKEND=sine WARMUP=1 {sys.executable} -m container serve",
                   "--starts", "1", "--out", str(tmp_path), "--threshold", "t_copy_s<0.001", *_outputs(tmp_path, "tcopy")])
    finally:
        srv.stop()
    assert rc == EXIT_THRESHOLD and "t_copy_s < 0.001" in capsys.readouterr().err
    _check_outputs(tmp_path, "tcopy", ["starts"])
