"""What a first `pulumi up` on an empty account depends on, read from the program's resource graph
under Pulumi's mocks: the image, the weights, destroy, instance-type changes, config AWS accepts."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest

from speech.schema.artifacts import TtotalArtifact
from speech.infra.components import cache
from speech.infra.components.guard import TAG_INSTANCE_TYPE
from speech.errors import ConfigError
from speech.deploy.hosting import endpoint_name, startup_health_check_timeout_s
from speech.infra.preview import run_preview
from speech.deploy.weights import KOKORO_PYPI, cache_inputs, cache_key, weights_layout

ROOT = Path(__file__).resolve().parents[2]
REPO_URL = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/kokoro-82m-images"


@pytest.fixture
def fresh(kokoro_entry, write_stack):
    """A new user's stack: no image (the program builds it), no measurements."""
    del kokoro_entry["image"], kokoro_entry["measurements"]
    return run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="fresh"))


def test_image_is_built_pushed_and_run_by_digest(fresh):
    [img] = fresh.of_type("docker-build:index:Image")
    i = img.inputs
    assert i["push"] is True and i["platforms"] == ["linux/amd64"]
    assert i["context"] == {"location": "."} and i["dockerfile"] == {"location": "container/Dockerfile"}
    [tag] = i["tags"]
    assert re.fullmatch(re.escape(REPO_URL) + r":ctx-[0-9a-f]{12}", tag)
    assert i["registries"][0]["address"] == "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
    model = fresh.named("kokoro-82m-model").inputs["primaryContainer"]
    digest = fresh.outputs["endpoints"]["kokoro-82m"]["image"].split("@")[1]
    assert model["image"] == f"{REPO_URL}@{digest}" and digest.startswith("sha256:")
    # /ping reports the pushed digest, so bench measures the image that is deployed.
    assert model["environment"]["IMAGE_DIGEST"] == digest
    assert model["environment"]["BACKEND"] == "onnx" and model["environment"]["MODEL_DIR"] == "/opt/ml/model"
    # First up: an endpoint and no scaling, with the reason.
    assert not fresh.of_type("aws:appautoscaling/target:Target")
    assert "no measurements" in fresh.gates[0].reason
    assert fresh.named("kokoro-82m-config").inputs["productionVariants"][0]["containerStartupHealthCheckTimeoutInSeconds"] == 600


def test_stack_owned_data_is_destroyed_with_the_stack(fresh):
    assert fresh.named("kokoro-82m-weights").inputs["forceDestroy"] is True
    repo = fresh.named("kokoro-82m-images").inputs
    assert repo["forceDelete"] is True and repo["imageTagMutability"] == "IMMUTABLE"


def test_built_image_other_than_measured_stops_before_the_model(kokoro_entry, write_stack):
    del kokoro_entry["image"]  # measurements of sha256:8b1b..., the mock build pushes another digest
    path = write_stack({"kokoro-82m": kokoro_entry}, stack="drifted")
    with pytest.raises(pulumi.RunError, match=r"ConfigError: speech-endpoints:models\.kokoro-82m: the image built from "
                                              r"container/Dockerfile has digest sha256:[0-9a-f]{64}, but the measurements"):
        run_preview(path)
    # In a first preview the digest is unknown: scaling is previewed, the check runs at the push.
    first = run_preview(path, first_preview=True)
    assert first.of_type("aws:appautoscaling/target:Target")
    assert first.named("kokoro-82m-model").inputs["primaryContainer"]["image"] == "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    # ... and with allow_config_mismatch the image may differ (a planned experiment, not an accident).
    assert run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="ok", allow_config_mismatch=True)).of_type(
        "aws:appautoscaling/target:Target")


def test_instance_type_change_deregisters_scaling_before_the_endpoint_update(kokoro_entry, write_stack):
    result = run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="order"))
    guard = result.named("kokoro-82m-scaling-guard-run")
    assert guard.inputs["triggers"] == {"instance_type": "ml.g5.xlarge"}
    assert json.loads(guard.inputs["input"])["resource_id"] == "endpoint/order-kokoro-82m/variant/AllTraffic"
    endpoint = result.named("kokoro-82m-endpoint")
    assert guard.urn in endpoint.dependencies  # step 1 before step 2
    target = result.named("kokoro-82m-target")
    assert endpoint.urn in target.dependencies  # step 3 after step 2
    assert target.inputs["tags"][TAG_INSTANCE_TYPE] == "ml.g5.xlarge"
    assert target.delete_before_replace and target.replace_on_changes == [f'tags["{TAG_INSTANCE_TYPE}"]']
    for name in ("kokoro-82m-scale-out", "kokoro-82m-scale-in", "kokoro-82m-surge"):
        assert result.named(name).delete_before_replace, name
    policy = json.loads(result.named("kokoro-82m-scaling-guard-policy").inputs["policy"])
    assert policy["Statement"][0]["Action"] == ["application-autoscaling:DeregisterScalableTarget"]


def test_weights_source_names_the_prefix_and_reruns_the_build():
    layout = weights_layout(KOKORO_PYPI)
    inputs = cache_inputs()
    key = cache_key(layout, inputs)
    assert cache_key(layout, {**inputs, "weight_cache.sh": inputs["weight_cache.sh"] + b"\n"}) != key
    other = type(layout)(source=layout.source, packages=layout.packages[:-1], backend=layout.backend, files=layout.files)
    assert cache_key(other, inputs) != key
    with pytest.raises(ConfigError, match=r"^w: 'pypi:other' is not a weights source"):
        weights_layout("pypi:other", "w")


def test_build_timeout_and_trigger_wait_agree(fresh):
    assert cache.build_may_take_s() <= cache.trigger_wait_s() <= cache.TRIGGER_TIMEOUT_S
    project = fresh.named("kokoro-82m-cache-sync").inputs
    assert (project["buildTimeout"], project["queuedTimeout"]) == (cache.BUILD_TIMEOUT_MIN, cache.QUEUED_TIMEOUT_MIN)
    [fn] = [r for r in fresh.of_type("aws:lambda/function:Function") if r.name == "kokoro-82m-cache-trigger"]
    assert fn.inputs["timeout"] == cache.TRIGGER_TIMEOUT_S
    assert f"> {cache.MARGIN_S * 1000}" in cache.TRIGGER_CODE


def test_start_up_timeout_from_measured_phases(kokoro_entry):
    t = TtotalArtifact.model_validate(kokoro_entry["measurements"]["ttotal"])
    assert startup_health_check_timeout_s(t) == 83  # ceil(3 x 7.535 + 60)
    slow = copy.deepcopy(kokoro_entry["measurements"]["ttotal"])
    # A container that takes 2000 s longer to become ready: every phase from `ready` on moves.
    names = [p["name"] for p in slow["phases"]]
    for p in slow["phases"][names.index("ready"):]:
        p["offset_s"] += 2000
    slow["measured_total_s"] += 2000
    assert startup_health_check_timeout_s(TtotalArtifact.model_validate(slow)) == 3600
    assert startup_health_check_timeout_s(None) == 600


@pytest.mark.parametrize("period,ok", [(10, True), (20, True), (30, True), (60, True), (120, True), (45, False), (90, False)])
def test_metric_period_is_one_cloudwatch_accepts(kokoro_entry, write_stack, period, ok):
    kokoro_entry["plan"]["reaction"]["metric_period_s"] = period
    path = write_stack({"kokoro-82m": kokoro_entry})
    if ok:
        run_preview(path)
        return
    with pytest.raises(ConfigError, match=rf"^speech-endpoints:models\.kokoro-82m\.plan\.reaction\.metric_period_s: "
                                          rf"metric_period_s {period} is not an alarm period"):
        run_preview(path)


@pytest.mark.slow
def test_endpoint_name_checked_at_preview_in_one_line(kokoro_entry, write_stack, tmp_path):
    assert endpoint_name("dev", "kokoro-82m") == "dev-kokoro-82m"
    with pytest.raises(ConfigError, match="SageMaker allows letters, digits and '-'"):
        endpoint_name("my_stack", "kokoro-82m")
    write_stack({"kokoro-82m": kokoro_entry}, stack="a-very-long-stack-name-for-a-team-that-likes-details-and-more")
    proc = subprocess.run([sys.executable, "-m", "speech", "preview", "--stack",
                           "a-very-long-stack-name-for-a-team-that-likes-details-and-more", "--stack-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("ConfigError: speech-endpoints:models.kokoro-82m: endpoint name ")
    assert "72 characters, SageMaker allows 63" in line


def test_dockerignore_keeps_the_context_to_container():
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert rules[:2] == ["*", "!container/"]
    dockerfile = (ROOT / "container/Dockerfile").read_text()
    copies = re.findall(r"^COPY (\S+)", dockerfile, flags=re.M)
    assert copies and all(src.startswith("container") for src in copies)


def test_the_built_image_can_run_the_backend_the_weights_need():
    """The Model sets BACKEND from the weights layout; the image must have that backend's runtime."""
    layout = weights_layout(KOKORO_PYPI)
    dockerfile = (ROOT / "container/Dockerfile").read_text()
    [req] = re.findall(r"^COPY (container/requirements[^ ]*\.txt) ", dockerfile, flags=re.M)
    pins = {line.split("==")[0].split(">=")[0].strip() for line in (ROOT / req).read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    runtime = {"onnx": "onnxruntime", "torch": "kokoro"}[layout.backend]
    assert runtime in pins, f"{req} lacks {runtime}, which BACKEND={layout.backend} imports"
