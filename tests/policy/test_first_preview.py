"""The pack on a first preview of a new stack (`python -m policy check --first-preview`): ids, ARNs,
URLs and image digests unknown, dependencies sent, as the engine does. Fresh stacks pass; scaling
planned for another image or instance type is still blocked. The dev stack goes through the CLI and
the real pack process; the others through the in-process pack (the same policies, called directly)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy.check import preview_resources
from policy.harness import UNKNOWN
from tests.policy.conftest import write_built_stack
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policy", "check", "--first-preview", "--json", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=240, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _mandatory(proc: subprocess.CompletedProcess) -> list[dict]:
    return [v for v in json.loads(proc.stdout)["violations"] if v["level"] == "mandatory"]


def test_resources_reach_the_pack_as_in_a_first_preview(tmp_path):
    resources, _ = preview_resources(write_built_stack(tmp_path), "built", first_preview=True)
    by = {r.name: r for r in resources}
    # Provider-computed outputs are unknown: the repository URL, so the built image and the Model's image.
    assert by["kokoro-82m-model"].props["primaryContainer"]["image"] == UNKNOWN
    assert by["kokoro-82m-execution-policy"].props["policy"] == UNKNOWN
    # Names pulumi-aws generates in Check are known, as in a real preview.
    assert by["kokoro-82m-config"].props["name"].startswith("kokoro-82m-config-")
    # ... and the engine's dependencies travel with each resource.
    assert by["kokoro-82m-image-image"].urn in by["kokoro-82m-model"].property_dependencies["primaryContainer"]
    assert by["kokoro-82m-config"].urn in by["kokoro-82m-endpoint"].property_dependencies["endpointConfigName"]


@pytest.mark.slow
def test_dev_stack_first_preview_passes():
    proc = _cli("--stack", "dev")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _mandatory(proc) == []


def _first_preview(pack, stack_file: Path, stack: str):
    resources, _ = preview_resources(stack_file, stack, first_preview=True)
    return pack.check(resources)


def test_fresh_stack_without_measurements_passes(tmp_path, pack):
    report = _first_preview(pack, write_built_stack(tmp_path), "built")
    assert report.mandatory == [], [d.message for d in report.mandatory]
    assert not any(d.policy.startswith("scaling") for d in report.diagnostics)


def test_fresh_stack_building_its_measured_image_defers_the_digest_to_up(tmp_path, pack):
    report = _first_preview(pack, write_built_stack(tmp_path, measurements=True), "built")
    assert report.mandatory == [], [d.message for d in report.mandatory]
    [deferred] = report.of("deployment-matches-fingerprint")
    assert deferred.level == "advisory" and "during preview" in deferred.message
    assert "compared with the measured sha256:8b1b96bc4dc0... when it is pushed" in deferred.message


def _stack_with(tmp_path: Path, **entry_changes) -> Path:

    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    config["speech-endpoints:models"]["kokoro-82m"].update(entry_changes)
    # Plan anyway: the program's gate would refuse; the pack must refuse on its own.
    config["speech-endpoints:allow_config_mismatch"] = True
    path = tmp_path / "Pulumi.tamper.yaml"
    path.write_text(json.dumps({"config": config}))
    return path


def test_scaling_for_another_instance_type_is_blocked(tmp_path, pack):
    report = _first_preview(pack, _stack_with(tmp_path, instance_type="ml.g6.xlarge"), "tamper")
    [v] = [d for d in report.mandatory if d.policy == "deployment-matches-fingerprint"]
    assert "deploys instance type 'ml.g6.xlarge'" in v.message and "measured on 'ml.g5.xlarge'" in v.message


def test_scaling_for_another_image_is_blocked(tmp_path, pack):
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro-82m@sha256:" + "ab" * 32
    report = _first_preview(pack, _stack_with(tmp_path, image=image), "tamper")
    [v] = [d for d in report.mandatory if d.policy == "deployment-matches-fingerprint"]
    assert "deploys image digest sha256:abababababab" in v.message


# --- preview-time parity: what the pack sees in a first preview is what `pulumi up` creates --------

STAGING = "staging-kokoro-82m"


def _external_receipts_stack(tmp_path: Path) -> tuple[Path, dict]:
    from tests.policy.policy_edits import receipts_of, with_evidence, with_receipt_keys

    config = embedded_config(ROOT / "Pulumi.dev.yaml")  # artifacts inline, as the program resolves them
    entry = with_receipt_keys(with_evidence(config["speech-endpoints:models"]["kokoro-82m"], STAGING))
    entry["measured_on"] = {"endpoint": STAGING, "why": "staging runs the release image",
                            "receipt_bucket": "staging-provenance"}
    config["speech-endpoints:models"]["kokoro-82m"] = entry
    path = tmp_path / "Pulumi.ext.yaml"
    path.write_text(json.dumps({"config": config}))
    return path, receipts_of(entry)


def test_first_preview_with_an_external_receipt_bucket_shows_its_scaling(tmp_path, pack):
    """Receipts in a bucket that already exists are read in the first preview too (the read does not
    wait on anything this update creates): the scaling `pulumi up` creates is in the preview."""
    path, receipts = _external_receipts_stack(tmp_path)
    resources, result = preview_resources(path, "ext", first_preview=True, receipts=receipts)
    [gate] = result.gates
    assert gate.enabled, gate.reason
    assert [r for r in resources if r.type == "aws:appautoscaling/target:Target"]
    report = pack.check(resources)
    assert not report.mandatory, [d.message for d in report.mandatory]


def test_first_preview_with_an_unreadable_external_bucket_is_the_gates_reason(tmp_path):
    path, receipts = _external_receipts_stack(tmp_path)
    from speech.infra.preview import run_preview

    result = run_preview(path, "ext", first_preview=True, receipts=receipts,
                         bucket_errors={"staging-provenance": "NoSuchBucket: The specified bucket does not exist"})
    [gate] = result.gates
    assert not gate.enabled and "could not be read" in gate.reason and "NoSuchBucket" in gate.reason
    assert not result.of_type("aws:appautoscaling/target:Target")


def test_first_preview_of_an_async_route_passes_without_realtime_alarms(tmp_path, pack):
    from tests.speech.infra.test_batch_program import batch_entry

    config = embedded_config(ROOT / "Pulumi.dev.yaml")  # artifacts inline, as the program resolves them
    models = config["speech-endpoints:models"]
    models["narration"] = batch_entry(models["kokoro-82m"])
    path = tmp_path / "Pulumi.batch.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "batch", first_preview=True)
    # The dev fleet at the reference peak (293 x ml.g5.xlarge) plus the batch route passes the
    # default daily ceiling; this test is about the async route's alarms, not the budget.
    report = pack.check(resources, {"daily-cost-ceiling": {"daily-budget-usd": 20000}})
    assert not report.mandatory, [d.message for d in report.mandatory]
    names = [r.name for r in resources if r.type == "aws:cloudwatch/metricAlarm:MetricAlarm"]
    assert "narration-obs-errors-5xx" in names
    assert not [n for n in names if n.startswith("narration-obs-") and ("ttfab" in n or n.endswith("-rate"))]
    assert [r for r in resources if r.type == "aws:appautoscaling/target:Target" and "narration" in r.name]


def test_first_preview_of_a_components_route_passes_and_sets_the_copy_cores(pack):
    resources, _ = preview_resources(ROOT / "examples" / "Pulumi.components.yaml", "components", first_preview=True)
    report = pack.check(resources)
    assert not report.mandatory, [d.message for d in report.mandatory]
    by = {r.name: r for r in resources}
    assert by["kokoro-82m-model"].props["primaryContainer"]["environment"]["CPU_CORES"] == "1.25"
    assert [r for r in resources if r.type == "aws:appautoscaling/target:Target"]
