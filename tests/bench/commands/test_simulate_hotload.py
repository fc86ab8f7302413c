"""bench simulate --hot-load: the measured copy artifact against the reference instance."""

from __future__ import annotations

import json

import pytest

from bench.cli.main import main

from ..conftest import REF, ROOT

# Each test here runs a tune, a preview or the pack on whole stacks (seconds apiece, the setup's fixture
# tens): make test runs them, make test-fast (the inner loop) leaves them out.
pytestmark = pytest.mark.slow

Q = str(REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json")
T = str(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json")
COPY = ROOT / "artifacts" / "local" / "copy-kokoro-82m-local-4ed3d00a.json"
TRACE = "diurnal:peak=500,trough=50,hours=1,spikes=2,spike_factor=2,spike_s=300"


def test_hot_load_table_and_json(tmp_path, capsys):
    rc = main(["simulate", "--qmax", Q, "--ttotal", T, "--trace", TRACE, "--policies", "plan", "--hot-load", str(COPY),
               "--copies-fit", "4", "--headroom-copies", "4", "--out", str(tmp_path), "--json", "--plot"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    hot = doc["hot_load"]
    copy = json.loads(COPY.read_text())
    assert hot["copies_fit"] == 4 and hot["t_copy_s"] == copy["t_copy_s"]
    rows = {r["policy"]: r for r in hot["results"]}
    assert list(rows) == ["instance-only", "instance-only x4", "hot-load"]
    assert rows["hot-load"]["first_added_serving_s"] == pytest.approx(copy["t_copy_s"], abs=1.5)
    assert rows["instance-only"]["first_added_serving_s"] == pytest.approx(hot["startup_s"], abs=1.5)
    # Seeded and deterministic: with 4 copies of headroom the second surge finds spare memory too.
    assert rows["hot-load"]["rejected_share"] < rows["instance-only"]["rejected_share"]
    assert rows["hot-load"]["instance_hours"] < rows["instance-only"]["instance_hours"]
    assert doc["simulation"]["kind"] == "simulation"
    assert (tmp_path / "hotload-kokoro-82m-diurnal.png").stat().st_size > 10_000


def test_memory_full_on_the_plans_instance(tmp_path, capsys):
    """Text output; the copies-fit table row names what limited the packing."""
    rc = main(["simulate", "--qmax", Q, "--ttotal", T, "--trace", TRACE, "--policies", "plan", "--hot-load", str(COPY),
               "--copies-fit", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "1 copies fit one instance (--copies-fit)" in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith(("instance-only", "hot-load"))}
    assert lines["hot-load"].split()[1:5] == lines["instance-only"].split()[1:5]  # no gain


@pytest.mark.parametrize("extra, needle", [
    (["--copies-fit", "0"], "--copies-fit 0"),
    (["--copies-fit", "2", "--headroom-copies", "-1"], "--headroom-copies -1"),
    (["--hot-load-instance-type", "ml.nothing.large"], "not in the instance table"),
])
def test_hot_load_bad_input(tmp_path, capsys, extra, needle):
    rc = main(["simulate", "--qmax", Q, "--ttotal", T, "--trace", TRACE, "--policies", "plan", "--hot-load", str(COPY),
               "--out", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err


def test_hot_load_cpu_packing_says_it_is_an_upper_bound(tmp_path, capsys):
    rc = main(["simulate", "--qmax", Q, "--ttotal", T, "--trace", TRACE, "--policies", "plan", "--hot-load", str(COPY),
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "limited by host_memory" in out and "upper bound" in out
