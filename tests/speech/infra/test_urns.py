"""Resource URNs of the dev and example stacks, pinned: a refactor that renames, re-parents or re-types a
resource would make `pulumi up` replace it on every deployed stack (a SageMaker endpoint replaced is an
outage), so every pinned URN must still be produced, or be claimed by a ``pulumi.Alias`` of the
resource that moved (the engine then moves the deployed resource to its new URN instead of replacing it).

New resources are free to appear. A resource removed on purpose is taken out of tests/speech/data/urns.json
in the same commit that removes it; a moved one gets a ``pulumi.Alias`` and keeps its pinned URN in the
file, as the URN every stack deployed before the move still holds.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from speech.infra.preview import run_preview

ROOT = Path(__file__).resolve().parents[3]
PINNED = json.loads((ROOT / "tests/speech/data/urns.json").read_text())


@pytest.fixture(scope="module", params=sorted(PINNED))
def preview(request):
    stack_dir, stack = request.param.split("/")
    return request.param, run_preview(ROOT / stack_dir / f"Pulumi.{stack}.yaml", stack)


def test_every_pinned_urn_is_still_produced(preview):
    where, result = preview
    produced = {r.urn for r in result.resources}
    moved = {old: r for r in result.resources for old in r.aliases}
    missing = sorted(set(PINNED[where]) - produced - set(moved))
    stack = where.split("/")[1]
    assert not missing, f"{len(missing)} resource(s) of the {stack} stack would be replaced or deleted: {missing[:5]}"
    # A pinned URN kept by an alias is kept by a resource of the pinned type (moved, not re-typed).
    assert all(moved[old].type == old.split("::")[2].split("$")[-1] for old in set(PINNED[where]) - produced)


def test_each_old_urn_is_claimed_by_one_resource_of_the_same_name(preview):
    """No two resources claim the same old URN and no resource claims a URN another one still has
    (the engine refuses both); an alias keeps the resource's name (the program's aliases move a
    resource under a new parent, pulumi-aws's own rename a type)."""
    _, result = preview
    produced = {r.urn for r in result.resources}
    claims = Counter(old for r in result.resources for old in set(r.aliases))
    assert claims, "no resource carries an alias: the model component's children lost theirs"
    assert not [old for old, n in claims.items() if n > 1]
    assert not set(claims) & produced
    for r in result.resources:
        assert all(old.split("::")[3] == r.name for old in r.aliases), r.aliases


def test_every_resource_of_a_model_is_inside_its_speech_model(preview):
    """The program is config -> one SpeechModel per model -> outputs: only the stack's shared alarm
    topic and the aws-native provider stay outside a model."""
    _, result = preview
    by_urn = {r.urn: r for r in result.resources}
    models = {r.urn: r.name for r in result.resources if r.type == "speech:index:SpeechModel"}
    assert models

    def model_of(r):
        while r is not None and r.urn not in models:
            r = by_urn.get(r.parent)
        return None if r is None else models[r.urn]

    outside = {(r.type, r.name) for r in result.resources if r.urn not in models and model_of(r) is None}
    assert outside <= {("speech:index:AlarmTopic", "alarms"), ("aws:sns/topic:Topic", "alarms-topic"),
                       ("aws:kms/key:Key", "alarms-key"), ("pulumi:providers:aws-native", "aws-native")}, outside
    # Each model's resources are named after it (they were before the component existed).
    assert all(r.name.startswith(model_of(r)) for r in result.resources if model_of(r) is not None)


def test_every_deployed_urn_maps_to_one_resource_by_the_engines_rules(preview):
    """Issue 46 item 4: the model component's grandchildren (Endpoint, EndpointConfig, Model, alarms,
    scalable targets and the scaling made inside ``apply``) carry no alias of their own; the engine
    derives theirs from their parent's. With the URNs and aliases formed as the engine forms them
    (speech.infra.urns: every ancestor's type, inherited aliases), every URN a stack deployed before
    the move holds is either unchanged or claimed by exactly one resource of the same type and name:
    `pulumi up` moves it, nothing is created, replaced or deleted."""
    from speech.infra.urns import engine_urns, old_urn_from_mock

    where, result = preview
    stack = where.split("/")[1]
    engine = engine_urns(result.resources, stack, "speech-endpoints")
    current = {e.urn for e in engine.values()}
    claims: dict[str, list[str]] = {}
    for e in engine.values():
        for old in e.aliases:
            claims.setdefault(old, []).append(e.urn)
    inherited_only = []
    for old in map(old_urn_from_mock, PINNED[where]):
        if old in current:
            continue
        assert len(claims.get(old, [])) == 1, f"{old} is claimed by {claims.get(old, [])}"
        [new] = claims[old]
        assert old.split("::")[3] == new.split("::")[3] and old.split("::")[2].split("$")[-1] == new.split("::")[2].split("$")[-1]
        mover = next(r for r in result.resources if engine[r.urn].urn == new)
        if not mover.alias_specs:
            inherited_only.append(old)
    # The check covers the grandchildren: some deployed URNs are kept only by inherited aliases.
    assert any("sagemaker" in u.split("::")[2].split("$")[-1] for u in inherited_only), inherited_only
    assert not set(claims) & current


EXAMPLE_STACKS = ["./dev"] + sorted(f"examples/{p.name.split('.')[1]}" for p in (ROOT / "examples").glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("where", EXAMPLE_STACKS)
def test_every_resource_under_a_model_keeps_its_pre_component_urn(where):
    """For every resource of every example stack (pinned or not): the URN it had before the
    SpeechModel component existed (its chain without ``speech:index:SpeechModel``) is its own alias
    or one the engine derives from its ancestors', so no deployed stack of any example loses one."""
    from speech.infra.urns import engine_urns

    stack_dir, stack = where.split("/")
    result = run_preview(ROOT / stack_dir / f"Pulumi.{stack}.yaml", stack)
    engine = engine_urns(result.resources, stack, "speech-endpoints")
    model = "speech:index:SpeechModel"
    moved = [e for r, e in ((r, engine[r.urn]) for r in result.resources)
             if f"{model}$" in e.urn and r.type != model]
    for e in moved:
        head, rest = e.urn.split(f"::{model}$", 1) if f"::{model}$" in e.urn else e.urn.split(f"${model}$", 1)
        before = f"{head}::{rest}" if f"::{model}$" in e.urn else f"{head}${rest}"
        assert before in e.aliases, f"{e.urn} does not claim {before}"
    assert moved or model not in {r.type for r in result.resources}
