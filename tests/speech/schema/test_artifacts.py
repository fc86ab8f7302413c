"""Artifact schemas, slugs, atomic writes and loader errors."""

from __future__ import annotations

import json
import os

import pytest
from pydantic import ValidationError

from speech.errors import ArtifactError
from speech.files import atomic_write_text, load_artifact, write_artifact
from speech.schema.artifacts import Fingerprint, QmaxArtifact, TtotalArtifact, make_slug, qmax_filename


def test_slug_from_instance_and_digest():
    assert make_slug("ml.g5.xlarge", "sha256:8b1b96bc4dc0b30d" + "0" * 48) == "g5xlarge-8b1b96bc"
    with pytest.raises(ValueError, match="does not match"):
        Fingerprint(instance_type="ml.g5.xlarge", image_digest="sha256:" + "1" * 64, slug="g5xlarge-8b1b96bc")


def test_reference_filenames_encode_what_was_measured(qmax_ref):
    assert qmax_filename(qmax_ref) == "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"


def test_roundtrip_is_identical(tmp_path, qmax_ref):
    path = write_artifact(tmp_path / "q.json", qmax_ref)
    assert load_artifact(path, QmaxArtifact) == qmax_ref


def test_artifacts_are_frozen_and_strict(qmax_ref):
    with pytest.raises(ValidationError, match="frozen_instance"):
        qmax_ref.q_max = 3  # type: ignore[misc]
    data = json.loads(qmax_ref.model_dump_json())
    data["surprise"] = 1
    with pytest.raises(Exception, match="surprise"):
        QmaxArtifact.model_validate(data)


def test_missing_file_names_path(tmp_path):
    with pytest.raises(ArtifactError, match=r"nope\.json: no such file"):
        load_artifact(tmp_path / "nope.json", QmaxArtifact)


def test_invalid_json_names_line(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"kind": "qmax",\n  oops}')
    with pytest.raises(ArtifactError, match=r"bad\.json: invalid JSON at line 2"):
        load_artifact(p, QmaxArtifact)


def test_wrong_schema_version_and_kind(tmp_path, qmax_ref):
    data = json.loads(qmax_ref.model_dump_json())
    p = tmp_path / "v.json"
    p.write_text(json.dumps({**data, "schema_version": 7}))
    with pytest.raises(ArtifactError, match="schema_version 7 is not supported"):
        load_artifact(p, QmaxArtifact)
    with pytest.raises(ArtifactError, match="is a 'qmax' artifact, expected 'ttotal'"):
        load_artifact(p.with_name("v.json"), TtotalArtifact)


def test_field_error_names_the_field(tmp_path, qmax_ref):
    data = json.loads(qmax_ref.model_dump_json())
    data["ladder"][2]["ttfab_p95_ms"] = "fast"
    p = tmp_path / "f.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match=r"field ladder\.2\.ttfab_p95_ms"):
        load_artifact(p, QmaxArtifact)


def test_ladder_must_increase(qmax_ref):
    data = json.loads(qmax_ref.model_dump_json())
    data["ladder"][1], data["ladder"][2] = data["ladder"][2], data["ladder"][1]
    with pytest.raises(Exception, match="strictly increase"):
        QmaxArtifact.model_validate(data)


def test_ttotal_total_is_its_last_phase(ttotal_ref):
    data = json.loads(ttotal_ref.model_dump_json())
    data["measured_total_s"] = 100.0
    with pytest.raises(Exception, match="measured_total_s 100.0 is not the last applicable phase's offset 260.248"):
        TtotalArtifact.model_validate(data)
    # The plan computes the reaction bound and planning total; a schema 2 artifact refuses them.
    data = json.loads(ttotal_ref.model_dump_json())
    with pytest.raises(Exception, match="planning_total_s"):
        TtotalArtifact.model_validate({**data, "planning_total_s": 320.248})


def _as_schema_1_qmax(q: QmaxArtifact, **edits) -> dict:
    data = json.loads(q.model_dump_json())
    for k in ("instances", "cloudwatch_ratio_source"):
        del data[k]
    return {**data, "schema_version": 1, **edits}


def test_schema_1_qmax_is_read_with_the_source_it_implies(tmp_path, qmax_ref):
    # ConcurrentRequestsPerModel read at every level: measured; the instance count was never recorded.
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(_as_schema_1_qmax(qmax_ref)))
    q = load_artifact(p, QmaxArtifact)
    assert q.schema_version == 2 and q.cloudwatch_ratio_source == "measured" and q.instances is None
    assert q.ladder == qmax_ref.ladder and q.q_max == qmax_ref.q_max
    # No CloudWatch reading on a SageMaker run: the 1.0 was assumed.
    data = _as_schema_1_qmax(qmax_ref, provenance={"origin": "assumption", "source": "x", "target": "sagemaker:e"})
    for lv in data["ladder"]:
        lv["cloudwatch_concurrency_max"] = None
    assert QmaxArtifact.model_validate(data).cloudwatch_ratio_source == "assumed"
    # A local server has no CloudWatch at all.
    data["provenance"]["target"] = "local:http://127.0.0.1:8080"
    assert QmaxArtifact.model_validate(data).cloudwatch_ratio_source == "not_applicable"


def test_schema_1_ttotal_drops_its_own_reaction_figures(tmp_path, ttotal_ref):
    data = {**json.loads(ttotal_ref.model_dump_json()), "schema_version": 1, "reaction_bound_s": 40.0,
            "planning_total_s": 300.248}
    p = tmp_path / "t1.json"
    p.write_text(json.dumps(data))
    assert load_artifact(p, TtotalArtifact) == ttotal_ref


def test_ratio_source_must_match_the_ratio(qmax_ref):
    data = json.loads(qmax_ref.model_dump_json())
    with pytest.raises(Exception, match="must be 1.0 when cloudwatch_ratio_source is assumed"):
        QmaxArtifact.model_validate({**data, "cloudwatch_ratio": 1.3, "cloudwatch_ratio_source": "assumed"})
    for lv in data["ladder"]:
        lv["cloudwatch_concurrency_max"] = None
    with pytest.raises(Exception, match="no ladder level has cloudwatch_concurrency_max"):
        QmaxArtifact.model_validate(data)


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "a.json"
    target.write_text("old")


    # Fails while encoding, after a plain write would already have truncated the file.
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "new " * 10_000 + "\ud800")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.json"]


def test_one_validation_formatter_names_key_reason_value_and_count():
    from pydantic import BaseModel, ValidationError, field_validator

    from speech.errors import describe_validation_error

    class Inputs(BaseModel):
        slo_ms: float
        surge_ratio: float

        @field_validator("surge_ratio")
        @classmethod
        def _below(cls, v: float) -> float:
            if v >= 1.5:
                raise ValueError(f"surge_ratio {v} leaves no scale-in band")
            return v

    with pytest.raises(ValidationError) as info:
        Inputs(slo_ms="fast", surge_ratio=2.0)
    line = describe_validation_error(info.value, "plan.json", key=lambda loc: "--" + str(loc[0]).replace("_", "-"))
    assert line.startswith("plan.json: --slo-ms: Input should be a valid number")
    assert "(got 'fast')" in line and line.endswith("(+1 more)")
    with pytest.raises(ValidationError) as info:
        Inputs(slo_ms=1, surge_ratio=2.0)
    # pydantic's "Value error, " prefix is noise to a user; the value and reason stay.
    assert describe_validation_error(info.value) == "surge_ratio: surge_ratio 2.0 leaves no scale-in band (got 2.0)"


# --- a measured claim needs evidence -------------------------------------------------------------

EVIDENCE = {"tool_version": "0.1.0", "region": "us-east-1", "measured_at": "2026-01-01T10:00:00Z",
            "ended_at": "2026-01-01T10:20:00Z"}


def _measured(artifact, kind: str, **provenance) -> dict:
    data = json.loads(artifact.model_dump_json())
    data["provenance"] = {"origin": "measured", "source": f"bench {kind}", "tool": f"bench {kind}",
                          "target": "sagemaker:dev-kokoro-82m", **EVIDENCE, **provenance}
    if kind == "qmax":
        data["client_overhead"] = {"loop_lag_p99_ms": 1.5, "cpu_fraction": 0.1}
    return data


def test_relabelled_reference_figures_are_refused_naming_the_missing_evidence(qmax_ref, ttotal_ref):
    for artifact in (qmax_ref, ttotal_ref):
        data = json.loads(artifact.model_dump_json())
        data["provenance"]["origin"] = "measured"
        with pytest.raises(ValidationError) as err:
            type(artifact).model_validate(data)
        text = str(err.value)
        for field in ("provenance.tool", "provenance.tool_version", "provenance.target", "provenance.ended_at"):
            assert field in text
    # The qmax claim also needs the load generator's overhead.
    bare = json.loads(qmax_ref.model_dump_json())
    bare["provenance"]["origin"] = "measured"
    with pytest.raises(ValidationError, match="client_overhead"):
        QmaxArtifact.model_validate(bare)


def test_a_measured_artifact_with_its_evidence_loads(qmax_ref, ttotal_ref):
    assert QmaxArtifact.model_validate(_measured(qmax_ref, "qmax")).provenance.target_endpoint == "dev-kokoro-82m"
    assert TtotalArtifact.model_validate(_measured(ttotal_ref, "ttotal")).provenance.region == "us-east-1"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"region": None}, "provenance.region"),
        ({"tool": "bench plan"}, "provenance.tool ('bench plan'"),
        ({"target": "sagemaker:"}, "provenance.target"),
        ({"target": "local:http://127.0.0.1:8080", "region": None}, "a sagemaker:<endpoint> target for fingerprint"),
        ({"ended_at": "2026-01-01T09:00:00Z"}, "ended_at after measured_at"),
    ],
)
def test_incomplete_or_inconsistent_evidence_is_named(qmax_ref, change, named):
    with pytest.raises(ValidationError) as err:
        QmaxArtifact.model_validate(_measured(qmax_ref, "qmax", **change))
    assert named in str(err.value)


def test_a_measured_ladder_needs_its_windows(qmax_ref):
    data = _measured(qmax_ref, "qmax")
    data["ladder"][0]["measure_s"] = None
    with pytest.raises(ValidationError, match=r"ladder measure_s .* at levels \[1\]"):
        QmaxArtifact.model_validate(data)


@pytest.mark.parametrize(
    ("target", "instance_type", "named"),
    [
        ("kubernetes:speech/dev-kokoro-82m", None, None),  # a cluster's Deployment, the pods' hardware by instance type
        ("kubernetes:", None, "provenance.target"),
        ("kubernetes:dev-kokoro-82m", None, "provenance.target"),
        ("kubernetes:speech/dev-kokoro-82m", "local", "the instance type of the pods' hardware"),
    ],
)
def test_a_kubernetes_measurement_names_its_deployment(ttotal_ref, target, instance_type, named):
    data = _measured(ttotal_ref, "ttotal")
    data["provenance"].update(target=target, region=None)
    data["trigger"] = "kubernetes-scale"
    if instance_type is not None:
        from speech.schema.artifacts import Fingerprint

        fp = Fingerprint.of(instance_type, data["fingerprint"]["image_digest"])
        data["fingerprint"] = json.loads(fp.model_dump_json())
    if named is None:
        assert TtotalArtifact.model_validate(data).provenance.target == target
    else:
        with pytest.raises(ValidationError, match=named):
            TtotalArtifact.model_validate(data)


def test_a_level_with_an_infinite_throughput_is_refused_with_its_field(tmp_path, qmax_ref):
    # JSON's 1e999 reads as inf: the CLI fuzz harness found such a file reaching the plan's
    # queueing math (a ValueError traceback from bench plan) instead of a refusal.
    data = json.loads(qmax_ref.model_dump_json())
    data["ladder"][0]["throughput_rps"] = 12345.0
    p = tmp_path / "q.json"
    p.write_text(json.dumps(data).replace("12345.0", "1e999"))
    with pytest.raises(ArtifactError, match=r"field ladder\.0\.throughput_rps"):
        load_artifact(p, QmaxArtifact)
