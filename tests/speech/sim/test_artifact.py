"""The tune artifact's promise is the plan's :class:`~speech.schema.promise.Promise` extended
(:class:`~speech.sim.artifact.TunePromise`): artifacts written before the merge still load, and
what they say survives a round trip key for key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from speech.files import load_artifact
from speech.schema.artifacts import canonical_sha256
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.promise import Promise
from speech.sim.artifact import TuneArtifact, TunePromise

# written by `bench tune` at cb71c71, when the tune artifact had its own Promise class (diurnal trace,
# 2 draws, 1 held-out day): the shapes users and CI already hold
DATA = Path(__file__).parents[1] / "data"
OLD_TUNE = DATA / "tune-kokoro-82m-diurnal-cb71c71.json"
OLD_PLAN = DATA / "plan-kokoro-82m-tuned-cb71c71.json"


def test_a_tune_artifact_written_before_the_merge_loads_and_dumps_the_same_keys_and_values():
    art = load_artifact(OLD_TUNE, TuneArtifact)
    assert isinstance(art.promise, Promise) and isinstance(art.seed, Promise)
    # the old key `within_slo_share` is the base's slo_share; the digest is the plan's bare hex
    written = json.loads(OLD_TUNE.read_text())
    assert art.promise.slo_share == written["promise"]["within_slo_share"]
    assert "sha256:" + art.promise.trace_sha256 == written["promise"]["trace_sha256"]
    # users' jq paths and CI checks read the same keys and values as before (only the order moved)
    assert json.loads(art.model_dump_json()) == written


def test_the_plan_written_beside_it_keeps_its_bytes_hash_and_the_tune_promise():
    """The plan's promise moved module, not shape: the plan's canonical hash (which stacks, simulation
    and tune artifacts record) is the one the tune artifact recorded, and its promise is the tune
    promise's plan part."""
    art, plan = load_artifact(OLD_TUNE, TuneArtifact), load_artifact(OLD_PLAN, PlanArtifact)
    assert canonical_sha256(plan) == art.tuned_plan_sha256
    assert plan.promise is not None
    assert art.promise.plan_promise().model_copy(update={"trace_hours": plan.promise.trace_hours}) == plan.promise


def _tune_promise(**changes: object) -> dict[str, object]:
    base = json.loads(OLD_TUNE.read_text())["promise"]
    return {**base, **changes}


def test_the_tune_promise_holds_the_base_bounds():
    # the old class took any float; the base refuses a share outside [0, 1] and a non-digest
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        TunePromise.model_validate(_tune_promise(within_slo_share=1.2))
    with pytest.raises(ValidationError, match="should match pattern"):
        TunePromise.model_validate(_tune_promise(trace_sha256="sha256:xyz"))
    with pytest.raises(ValidationError, match="retired per-minute oracle"):
        TunePromise.model_validate(_tune_promise(cost_vs_oracle=1.3))
    with pytest.raises(ValidationError, match="Extra inputs"):
        TunePromise.model_validate(_tune_promise(within_slo_share_mean=0.99))


def test_the_base_name_is_accepted_too_and_written_under_the_artifact_key():
    by_name = TunePromise.model_validate({**{k: v for k, v in _tune_promise().items() if k != "within_slo_share"},
                                          "slo_share": 0.999})
    out = json.loads(by_name.model_dump_json())
    assert out["within_slo_share"] == 0.999 and "slo_share" not in out


def test_plan_promise_keeps_the_plan_fields_only():
    p = TunePromise.model_validate(_tune_promise(trace_hours=3.0))
    plain = p.plan_promise()
    assert type(plain) is Promise and plain.trace_hours == 3.0 and plain.slo_share == p.slo_share
    assert set(json.loads(plain.model_dump_json())) <= set(Promise.model_fields)
