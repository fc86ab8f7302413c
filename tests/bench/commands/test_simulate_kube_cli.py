"""``bench simulate --policy hpa-v2,keda`` on every shipped trace (the two Azure traces and the
generators), and an unknown policy named with the choices."""

from __future__ import annotations

import json

import pytest

from bench.cli.main import main
from speech.sim.names import BUILTIN_TRACES
from tests.conftest import QMAX_REF, TTOTAL_REF

TRACES = [f"{name}:peak=60" for name in BUILTIN_TRACES] + ["diurnal:peak=60,trough=5,hours=2,seed=2",
                                                             "step:base=10,factor=4,at=300,duration=1200"]


@pytest.mark.parametrize("trace", TRACES)
def test_kubernetes_policies_run_on_every_shipped_trace(trace, tmp_path, capsys):
    rc = main(["simulate", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--trace", trace,
               "--policy", "plan,hpa-v2,keda", "--out", str(tmp_path), "--json"])
    assert rc == 0
    art = json.loads(capsys.readouterr().out)
    rows = {r["policy"]: r for r in art["results"]}
    assert set(rows) == {"plan", "hpa-v2", "keda"}
    for name in ("hpa-v2", "keda"):
        r = rows[name]
        assert r["refused_changes"] == 0  # a Deployment takes any count at any time
        assert 0.0 < r["within_slo_share"] <= 1.0 and r["instance_hours"] > 0


def test_an_unknown_policy_names_the_choices(tmp_path, capsys):
    rc = main(["simulate", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--trace", TRACES[-1],
               "--policy", "hpa", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "hpa-v2" in err and "keda" in err and not list(tmp_path.iterdir())
