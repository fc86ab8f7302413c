"""Unknown values during preview, policy config overrides, and the `python -m policy check` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy.harness import UNKNOWN, PolicyConfigError
from tests.policy.policy_edits import messages, named, set_path
from tests.stack_files import copy_stack, embedded_stack

ROOT = Path(__file__).resolve().parents[2]


# --- unknowns -----------------------------------------------------------------------------------


def test_unknown_target_value_cannot_pass_silently(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-out"), "targetTrackingScalingPolicyConfiguration.targetValue", UNKNOWN)
    report = pack.check(dev)
    [d] = report.of("scaling-matches-plan")
    assert d.level == "mandatory" and d.resource == "kokoro-82m-scale-out"
    assert d.message.startswith("cannot verify during preview: scaling policy 'kokoro-82m-scale-out'")
    assert "expected 15.9904" in d.message


def test_unknown_provenance_content_is_a_preview_violation(pack, dev):
    named(dev, "kokoro-82m-provenance").props["content"] = UNKNOWN
    msgs = messages(pack.check(dev), "scaling-requires-measured-provenance", "mandatory")
    assert len(msgs) == 1 and "cannot verify during preview" in msgs[0] and "content" in msgs[0]


def test_unknown_links_resolve_through_engine_dependencies(pack, dev):
    # In a first real preview, names that are outputs of other resources are unknown; the engine
    # still sends the dependency URNs, and the rules follow those.
    endpoint, config, model = (named(dev, n) for n in ("kokoro-82m-endpoint", "kokoro-82m-config", "kokoro-82m-model"))
    endpoint.props["endpointConfigName"] = UNKNOWN
    endpoint.property_dependencies = {"endpointConfigName": [config.urn]}
    set_path(config, "productionVariants.0.modelName", UNKNOWN)
    config.property_dependencies = {"productionVariants": [model.urn]}
    assert pack.check(dev).mandatory == []
    # Without the dependency the link is unverifiable: blocked, not passed.
    config.property_dependencies = {}
    config.dependencies = []
    msgs = messages(pack.check(dev), "deployment-matches-fingerprint", "mandatory")
    assert msgs and "cannot verify during preview" in msgs[0] and "modelName is unknown" in msgs[0]


def test_unknown_iam_policy_json_is_advisory_during_preview(pack, dev):
    named(dev, "kokoro-82m-execution-policy").props["policy"] = UNKNOWN
    report = pack.check(dev)
    [d] = report.of("iam-no-wildcard-actions")
    assert d.level == "advisory" and "during preview" in d.message
    assert report.mandatory == []


# --- policy config ------------------------------------------------------------------------------


def test_rule_set_to_advisory_through_config(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-out"), "targetTrackingScalingPolicyConfiguration.targetValue", 45.0)
    report = pack.check(dev, {"scaling-matches-plan": "advisory"})
    assert report.mandatory == []
    [msg] = messages(report, "scaling-matches-plan", "advisory")
    assert "targetValue is 45, expected 15.9904" in msg


def test_rule_disabled_through_config(pack, dev):
    set_path(named(dev, "kokoro-82m-weights-public-access"), "blockPublicAcls", False)
    report = pack.check(dev, {"s3-no-public-access": {"enforcementLevel": "disabled"}})
    assert report.of("s3-no-public-access") == []
    # The pack process keeps no state between checks: the next one is back to defaults.
    assert messages(pack.check(dev), "s3-no-public-access", "mandatory")


def test_all_advisory_then_one_mandatory(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-out"), "targetTrackingScalingPolicyConfiguration.targetValue", 45.0)
    report = pack.check(dev, {"all": "advisory", "scaling-matches-plan": "mandatory"})
    assert {d.policy for d in report.mandatory} == {"scaling-matches-plan"}


@pytest.mark.parametrize("config,expect", [
    ({"no-such-rule": "advisory"}, "not in this pack"),
    ({"scaling-matches-plan": "warn"}, "is not one of"),
    ({"daily-cost-ceiling": {"daily-budget-usd": "lots"}}, "must be a number"),
    ({"daily-cost-ceiling": {"budget": 1}}, "not a property of daily-cost-ceiling"),
])
def test_bad_policy_config_is_refused(pack, config, expect):
    with pytest.raises(PolicyConfigError, match=expect):
        pack.configure(config)


# --- the CLI ------------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policy", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=240, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.slow
def test_cli_dev_stack_passes_and_blocks_with_strict_config(tmp_path):
    ok = _cli("--stack", "dev", "--stack-dir", str(ROOT))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK: no mandatory violation" in ok.stdout and "ADVISORY (1):" in ok.stdout

    strict = tmp_path / "policy-config.json"
    strict.write_text(json.dumps({"scaling-requires-measured-provenance": {"allow-reference-artifacts": False}}))
    blocked = _cli("--stack", "dev", "--stack-dir", str(ROOT), "--config", str(strict), "--json")
    assert blocked.returncode == 1, blocked.stderr
    out = json.loads(blocked.stdout)
    assert out["blocked"] is True
    [v] = [v for v in out["violations"] if v["level"] == "mandatory"]
    assert v["policy"] == "scaling-requires-measured-provenance" and v["resource"] == "kokoro-82m-target"


@pytest.mark.slow
def test_cli_bad_input_exits_2(tmp_path):
    missing = _cli("--stack", "nope", "--stack-dir", str(tmp_path))
    assert missing.returncode == 2 and "Pulumi.nope.yaml" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    copy_stack(ROOT / "Pulumi.dev.yaml", tmp_path)
    res = _cli("--stack", "dev", "--stack-dir", str(tmp_path), "--config", str(bad))
    assert res.returncode == 2 and "not valid JSON" in res.stderr


@pytest.mark.slow
def test_cli_refuses_reference_figures_relabelled_as_measured(tmp_path):
    """The one-word relabelling (origin: reference -> measured) names what only a real run has."""
    # The embedded form (a referenced file edited this way fails its sha256 first).
    text = json.dumps(embedded_stack(ROOT / "Pulumi.dev.yaml"))
    assert text.count('"origin": "reference"') == 2
    (tmp_path / "Pulumi.relabelled.yaml").write_text(text.replace('"origin": "reference"', '"origin": "measured"'))
    res = _cli("--stack", "relabelled", "--stack-dir", str(tmp_path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "ConfigError" in res.stderr and "origin is 'measured'" in res.stderr
    for evidence in ("provenance.tool", "provenance.tool_version", "provenance.target", "provenance.ended_at"):
        assert evidence in res.stderr
    assert "Traceback" not in res.stderr
