"""The pack on hosting: components, through the real pack process: the example stack passes every
rule (the real-time rules included, which must not misfire on an endpoint without a model on its
variant); one realistic edit per component rule is caught."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from policy.check import load_config, preview_resources
from policy.check import main as check_main
from policy.harness import Resource
from tests.policy.policy_edits import messages, named, set_path
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_DIR = ROOT / "examples"
MODELS = "speech-endpoints:models"
COMPONENT_RULES = ("copy-scaling-matches-plan", "component-compute-matches-footprint", "no-variant-scaling-with-components",
                   "copy-scaling-requires-measured-provenance")


@pytest.fixture(scope="module")
def _components() -> list[Resource]:
    resources, _ = preview_resources(EXAMPLE_DIR / "Pulumi.components.yaml", "components")
    return resources


@pytest.fixture
def comp(_components) -> list[Resource]:
    return copy.deepcopy(_components)


def _stack_with(tmp_path: Path, edit) -> list[Resource]:
    config = embedded_config(EXAMPLE_DIR / "Pulumi.components.yaml")
    edit(config[MODELS]["kokoro-82m"])
    path = tmp_path / "Pulumi.c2.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "c2")
    return resources


def test_example_passes_every_rule(pack, comp):
    report = pack.check(comp)
    assert not report.mandatory, [d.message for d in report.mandatory]
    # Only the notice that the figures are not this endpoint's measurements.
    assert {d.policy for d in report.diagnostics} == {"scaling-from-unmeasured-figures"}
    assert {p for p in COMPONENT_RULES} <= set(pack.policies)


@pytest.mark.slow
def test_policy_check_cli_passes_the_example(capsys):
    assert check_main(["--stack-dir", str(EXAMPLE_DIR), "--stack", "components"]) == 0
    assert "OK: no mandatory violation" in capsys.readouterr().out


def test_mismatched_copy_target_is_blocked(pack, comp, capsys):
    set_path(named(comp, "kokoro-82m-copies-scale-out"), "targetTrackingScalingPolicyConfiguration.targetValue", 45.0)
    report = pack.check(comp)
    [msg] = messages(report, "copy-scaling-matches-plan", "mandatory")
    assert "scaling policy 'kokoro-82m-copies-scale-out'" in msg and "targetValue is 45, expected 15.9904" in msg
    assert "per-copy C_scale_max" in msg and "Q_max per copy 50" in msg and "fix:" in msg


@pytest.mark.parametrize("name,path,value,expect", [
    ("kokoro-82m-copies-target", "maxCapacity", 400.0, "maxCapacity is 400, expected 293"),
    ("kokoro-82m-copies-scale-in", "stepScalingPolicyConfiguration.cooldown", 60.0, "cooldown is 60, expected 300"),
    ("kokoro-82m-copies-scale-in-alarm", "threshold", 30.0, "threshold is 30, expected 10.6602"),
    ("kokoro-82m-copies-wake", "stepScalingPolicyConfiguration.cooldown", 60.0, "cooldown is 60, expected 261"),
    ("kokoro-82m-copies-wake-alarm", "statistic", "Average", "statistic is 'Average', expected 'Sum'"),
    ("kokoro-82m-config", "productionVariants.0.managedInstanceScaling.maxInstanceCount", 500.0,
     "managedInstanceScaling.maxInstanceCount is 500, expected 293"),
    ("kokoro-82m-model", "primaryContainer.environment.QUEUE_MAX_DEPTH", "64", "QUEUE_MAX_DEPTH is '64', expected '50'"),
])
def test_copy_scaling_each_number(pack, comp, name, path, value, expect):
    set_path(named(comp, name), path, value)
    [msg] = messages(pack.check(comp), "copy-scaling-matches-plan", "mandatory")
    assert f"'{name}'" in msg and expect in msg


def test_missing_wake_policy_leaves_zero_forever(pack, comp):
    comp[:] = [r for r in comp if r.name not in ("kokoro-82m-copies-wake", "kokoro-82m-copies-wake-alarm")]
    msgs = messages(pack.check(comp), "copy-scaling-matches-plan", "mandatory")
    assert any("0 scale-from-zero step policies (none), expected 1" in m and "copy floor 0" in m for m in msgs)
    assert any("0 NoCapacityInvocationFailures alarms" in m for m in msgs)


def test_compute_requirements_below_the_footprint(pack, comp):
    set_path(named(comp, "kokoro-82m-component"), "specification.computeResourceRequirements.minMemoryRequiredInMb", 2048)
    report = pack.check(comp)
    [msg] = messages(report, "component-compute-matches-footprint", "mandatory")
    assert "inference component 'kokoro-82m-component'" in msg
    assert "minMemoryRequiredInMb is 2048, expected 3380" in msg and "x (1 + 0.1) = 3380 MiB host memory" in msg


def test_margin_outside_the_configured_bounds(pack, tmp_path):
    resources = _stack_with(tmp_path, lambda e: e["components"].update(footprint_margin=0.0))
    report = pack.check(resources)
    [msg] = messages(report, "component-compute-matches-footprint", "mandatory")
    assert "margin of 0" in msg and "outside the allowed 0.05..0.5" in msg
    # Configurable: a team that measured its peak under the longest texts may allow 0.
    relaxed = pack.check(resources, {"component-compute-matches-footprint": {"footprint-margin-min": 0}})
    assert not messages(relaxed, "component-compute-matches-footprint")


def test_variant_scaling_competing_with_copies(pack, comp, _components):
    # A hand-written variant target on the same endpoint, as a user might add next to the copies.
    target = copy.deepcopy(named(comp, "kokoro-82m-copies-target"))
    target.name, target.urn = "hand-variant-target", target.urn.replace("kokoro-82m-copies-target", "hand-variant-target")
    target.props.update(resourceId="endpoint/components-kokoro-82m/variant/AllTraffic",
                        scalableDimension="sagemaker:variant:DesiredInstanceCount")
    comp.append(target)
    [msg] = messages(pack.check(comp), "no-variant-scaling-with-components", "mandatory")
    assert "scalable target 'hand-variant-target' scales endpoint 'kokoro-82m-endpoint'" in msg
    assert "two scaling paths" in msg


def test_model_on_the_variant_and_disabled_instance_scaling(pack, comp):
    variant = named(comp, "kokoro-82m-config").props["productionVariants"][0]
    variant["modelName"] = "kokoro-82m-model"
    variant["managedInstanceScaling"]["status"] = "DISABLED"
    msgs = messages(pack.check(comp), "no-variant-scaling-with-components", "mandatory")
    assert any("names model 'kokoro-82m-model'" in m for m in msgs)
    assert any("managedInstanceScaling.status is 'DISABLED', expected 'ENABLED'" in m for m in msgs)


def test_unmeasured_copy_artifact_blocked_when_config_forbids_it(pack, comp):
    report = pack.check(comp, {"copy-scaling-requires-measured-provenance": {"allow-unmeasured-copy-artifacts": False}})
    [msg] = messages(report, "copy-scaling-requires-measured-provenance", "mandatory")
    assert "copy artifact of origin 'assumption'" in msg and "bench tcopy" in msg


def test_real_time_rules_do_not_misfire_on_the_component_endpoint(pack, comp):
    report = pack.check(comp)
    for policy in ("deployment-matches-fingerprint", "one-scaling-path-per-variant", "daily-cost-ceiling",
                   "scaling-matches-plan", "scaling-requires-measured-provenance"):
        assert not messages(report, policy), policy
    # The fingerprint rule follows the component to its model: a different image there is caught.
    model = named(comp, "kokoro-82m-model")
    model.props["primaryContainer"]["image"] = model.props["primaryContainer"]["image"].split("@")[0] + "@sha256:" + "2" * 64
    [msg] = messages(pack.check(comp), "deployment-matches-fingerprint", "mandatory")
    assert "SageMaker model 'kokoro-82m-model' deploys image digest sha256:22222222" in msg


def test_daily_cost_counts_managed_instance_scaling(pack, comp):
    # 293 instances x $1.408 x 24 = $9,901 fits the default $10,000; at 400 instances it does not.
    set_path(named(comp, "kokoro-82m-config"), "productionVariants.0.managedInstanceScaling.maxInstanceCount", 400.0)
    [msg] = messages(pack.check(comp), "daily-cost-ceiling", "mandatory")
    assert "400 x ml.g5.xlarge" in msg and "$13,517/day" in msg


def test_production_config_blocks_the_example_and_first_preview_passes(pack, comp):
    # config.production.json: reference Q_max/T_total and the assumed footprint may not scale copies.
    report = pack.check(comp, load_config(ROOT / "policy" / "config.production.json"))
    msgs = messages(report, "copy-scaling-requires-measured-provenance", "mandatory")
    assert any("allow-unmeasured-copy-artifacts is false" in m for m in msgs), msgs
    # A fresh account's first preview (ids, ARNs unknown) passes the pack as it is.
    first, _ = preview_resources(EXAMPLE_DIR / "Pulumi.components.yaml", "components", first_preview=True)
    assert pack.check(first).mandatory == []
