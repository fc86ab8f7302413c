"""One edit to the scaling spec (speech/deploy/scaling/) and every reader follows it: the program under
Pulumi's mocks deploys the new value, the pack's scaling-matches-plan accepts that and rejects the
old one, bench validate/drift (scaling_check against moto) likewise, and the simulator uses it.
No other code changes: that is the contract docs/design.md §5 describes."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pulumi_policy import PolicyResource, StackValidationArgs

from bench.aws import client as aws
from bench.aws.scaling_check import compare
from policy import policies, rules
from policy.check import preview_resources
from policy.recompute import ProvenanceCache
from speech.deploy.scaling import realtime as scaling  # the real-time rules live here
from speech.sim.scaler import scaling_numbers

from ..conftest import ENDPOINT, create_endpoint, deploy_scaling

ROOT = Path(__file__).resolve().parents[3]


def _shorter_scale_in_window(monkeypatch) -> None:
    real = scaling.scale_in_alarm

    def twelve_periods(plan, endpoint_name, variant):
        return dataclasses.replace(real(plan, endpoint_name, variant), evaluation_periods=12, datapoints_to_alarm=12)

    monkeypatch.setattr(scaling, "scale_in_alarm", twelve_periods)


def _a_fifth_per_step(monkeypatch) -> None:
    real = scaling.scale_in_step

    def fifth(plan):
        kind, _, least = real(plan)
        return kind, -20, least

    monkeypatch.setattr(scaling, "scale_in_step", fifth)


def _two_at_least(monkeypatch) -> None:
    monkeypatch.setattr(scaling, "SCALE_IN_INSTANCES", 2)


EDITS = {
    # edit, (program resource, property path, old, new), pack messages, bench messages, simulator field
    "scale-in window": (
        _shorter_scale_in_window,
        ("kokoro-82m-scale-in-alarm", ("evaluationPeriods",), 30, 12),
        ["'kokoro-82m-scale-in-alarm' evaluationPeriods is 30, expected 12",
         "'kokoro-82m-scale-in-alarm' datapointsToAlarm is 30, expected 12"],
        [f"alarm {ENDPOINT}-scale-in (for {ENDPOINT}-scale-in) EvaluationPeriods is 30, plan says 12",
         f"alarm {ENDPOINT}-scale-in (for {ENDPOINT}-scale-in) DatapointsToAlarm is 30, plan says 12"],
        ("scale_in_periods", 30, 12),
    ),
    "scale-in step share": (
        _a_fifth_per_step,
        ("kokoro-82m-scale-in", ("stepScalingPolicyConfiguration", "stepAdjustments", 0, "scalingAdjustment"), -16, -20),
        ["'kokoro-82m-scale-in' stepScalingPolicyConfiguration.stepAdjustments.0.scalingAdjustment is -16, expected -20"],
        [f"{ENDPOINT}-scale-in adds PercentChangeInCapacity [-16] (at least 1), plan says PercentChangeInCapacity [-20] "
         "(at least 1)"],
        ("scale_in_percent", -16, -20),
    ),
    "scale-in least removed": (
        _two_at_least,
        ("kokoro-82m-scale-in", ("stepScalingPolicyConfiguration", "minAdjustmentMagnitude"), 1, 2),
        ["'kokoro-82m-scale-in' stepScalingPolicyConfiguration.minAdjustmentMagnitude is 1, expected 2"],
        [f"{ENDPOINT}-scale-in adds PercentChangeInCapacity [-16] (at least 1), plan says PercentChangeInCapacity [-16] "
         "(at least 2)"],
        ("scale_in_min_removed", 1, 2),
    ),
}


def _program():
    resources, _ = preview_resources(ROOT / "Pulumi.dev.yaml", "dev")
    return resources


def _value(resources, name, path):
    [r] = [r for r in resources if r.name == name]
    cur = r.props
    for p in path:
        cur = cur[p]
    return cur


def _pack(resources) -> list[str]:
    """scaling-matches-plan on the resources, through the pack's own conversion of the engine's data."""
    stack = policies.stack_from_args(StackValidationArgs([
        PolicyResource(r.type, dict(r.props), r.urn_in("dev", "speech-endpoints"), r.name, None, None, None, [], {})
        for r in resources
    ]))
    return [m for m, _ in rules.rule_matches_plan(stack, {}, ProvenanceCache(stack))]


@pytest.fixture(scope="module")
def before():
    """The program's resources with the spec as committed."""
    return _program()


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
@pytest.mark.parametrize("edit", list(EDITS))
def test_one_spec_edit_and_program_pack_validate_follow(edit, before, monkeypatch, aws_env, ref_plan):
    change, (res_name, path, old, new), pack_msgs, bench_msgs, (sim_field, sim_old, sim_new) = EDITS[edit]
    # Deployed on AWS with the spec as committed.
    create_endpoint(aws_env)
    deploy_scaling(aws_env, ref_plan)
    assert getattr(scaling_numbers(ref_plan), sim_field) == sim_old
    assert _value(before, res_name, path) == old

    change(monkeypatch)

    # The program deploys the new value.
    after = _program()
    assert _value(after, res_name, path) == new
    # The pack accepts what the program now deploys and names the old value as a difference.
    assert _pack(after) == []
    old_found = _pack(before)
    assert len(old_found) == len(pack_msgs) and all(want in got for want, got in zip(pack_msgs, old_found, strict=True)), old_found
    # bench validate/drift: the committed deployment now differs, by exactly this value...
    issues = compare(ref_plan, aws.read_deployed(aws_env, ENDPOINT))
    assert [i.kind for i in issues] == ["mismatch"] * len(bench_msgs), issues
    assert all(i.message.startswith(want) for want, i in zip(bench_msgs, issues, strict=True)), issues
    # ...and a deployment of the edited spec is clean.
    other = f"{ENDPOINT}-b"
    create_endpoint(aws_env, other)
    deploy_scaling(aws_env, ref_plan, other)
    assert compare(ref_plan, aws.read_deployed(aws_env, other)) == []
    # The simulator's policy uses it too.
    assert getattr(scaling_numbers(ref_plan), sim_field) == sim_new


def _one_floor(monkeypatch) -> None:
    """The spec gains a daily floor: 12 instances from 07:40 UTC."""

    def floors(plan, endpoint_name):
        return (scaling.ScheduledActionSpec(name=f"{endpoint_name}-floor-0740", schedule="cron(40 7 * * ? *)",
                                            timezone="UTC", min_capacity=12),)

    monkeypatch.setattr(scaling, "floor_actions", floors)


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_a_scheduled_floor_in_the_spec_and_every_reader_follows(before, monkeypatch, aws_env, ref_plan):
    create_endpoint(aws_env)
    deploy_scaling(aws_env, ref_plan)
    assert scaling_numbers(ref_plan).floors == ()
    assert not [r for r in before if r.type == rules.T_SCHEDULED]

    _one_floor(monkeypatch)

    # The program renders it: a new resource, under the Autoscaling component, with the spec's values.
    after = _program()
    [floor] = [r for r in after if r.type == rules.T_SCHEDULED]
    assert floor.name == "kokoro-82m-floor-0740"
    assert (floor.props["schedule"], floor.props["timezone"]) == ("cron(40 7 * * ? *)", "UTC")
    assert floor.props["scalableTargetAction"]["minCapacity"] == 12
    assert "speech:index:Autoscaling" in floor.urn_in("dev", "speech-endpoints")
    # The pack accepts it; without it (the committed program) the planned floor is missing; a
    # scheduled action the plan did not derive is refused.
    assert _pack(after) == []
    # (The committed target is registered with the plan's floor, not the one floor in force all day.)
    floor_low, missing = _pack(before)
    assert "minCapacity is 1, expected 12" in floor_low
    assert "scheduled floor 'dev-kokoro-82m-floor-0740'" in missing and "is not deployed" in missing
    edited = [dataclasses.replace(r, props={**r.props, "scalableTargetAction": {"minCapacity": 2}})
              if r.type == rules.T_SCHEDULED else r for r in after]
    [low] = _pack(edited)
    assert "scalableTargetAction.minCapacity is 2, expected 12" in low
    # bench drift/validate: the committed deployment lacks it; a deployment of the edited spec is clean.
    issues = compare(ref_plan, aws.read_deployed(aws_env, ENDPOINT))
    assert [i.kind for i in issues] == ["missing_scheduled"], issues
    other = f"{ENDPOINT}-b"
    create_endpoint(aws_env, other)
    deploy_scaling(aws_env, ref_plan, other)
    # Registered with the plan's floor, the target has MinCapacity 12 only once 07:40 UTC has run.
    after_raise = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    [not_yet] = compare(ref_plan, aws.read_deployed(aws_env, other), now=after_raise)
    assert not_yet.kind == "mismatch" and "MinCapacity is 1, plan says 12" in not_yet.message
    _raised(aws_env, other, 12)
    assert compare(ref_plan, aws.read_deployed(aws_env, other), now=after_raise) == []
    # ...and an extra, unplanned scheduled action on it is named.
    aws_env.client("application-autoscaling").put_scheduled_action(
        ServiceNamespace="sagemaker", ScheduledActionName="by-hand", Schedule="cron(0 9 * * ? *)",
        ResourceId=f"endpoint/{other}/variant/AllTraffic", ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        ScalableTargetAction={"MinCapacity": 50})
    assert [i.kind for i in compare(ref_plan, aws.read_deployed(aws_env, other), now=after_raise)] == ["orphan_scheduled"]
    # The simulator reads it too.
    assert scaling_numbers(ref_plan).floors == (("cron(40 7 * * ? *)", "UTC", 12),)


def _raised(sess, endpoint: str, n: int) -> None:
    """What a scheduled action does when it runs: the target's MinCapacity becomes its floor."""
    aas = sess.client("application-autoscaling")
    t = aas.describe_scalable_targets(ServiceNamespace="sagemaker",
                                      ResourceIds=[f"endpoint/{endpoint}/variant/AllTraffic"])["ScalableTargets"][0]
    aas.register_scalable_target(ServiceNamespace="sagemaker", ResourceId=t["ResourceId"],
                                 ScalableDimension=t["ScalableDimension"], MinCapacity=n, MaxCapacity=t["MaxCapacity"])


def test_drift_and_validate_judge_a_raised_window_by_the_entry_in_force(monkeypatch, aws_env, ref_plan):
    """A raise 07:40-10:00 Europe/Berlin: inside the window the raised MinCapacity is no drift, a
    minute before it (or after the release) the same target is; the edge is in the schedule's own
    time zone (06:40 UTC in winter). Before issue 34 drift compared MinCapacity with the plan's floor
    and reported every raised window."""

    def floors(plan, endpoint_name):
        return tuple(scaling.ScheduledActionSpec(name=f"{endpoint_name}-floor-{at}", schedule=cron, timezone="Europe/Berlin",
                                                 min_capacity=n)
                     for at, cron, n in (("0740", "cron(40 7 * * ? *)", 12), ("1000", "cron(0 10 * * ? *)", 1)))

    monkeypatch.setattr(scaling, "floor_actions", floors)
    create_endpoint(aws_env)
    deploy_scaling(aws_env, ref_plan)
    _raised(aws_env, ENDPOINT, 12)
    deployed = aws.read_deployed(aws_env, ENDPOINT)
    assert compare(ref_plan, deployed, now=datetime(2026, 1, 15, 6, 40, tzinfo=UTC)) == []   # 07:40 Berlin
    assert compare(ref_plan, deployed, now=datetime(2026, 1, 15, 8, 59, tzinfo=UTC)) == []   # 09:59 Berlin
    for outside in (datetime(2026, 1, 15, 6, 39, tzinfo=UTC), datetime(2026, 1, 15, 9, 0, tzinfo=UTC)):
        [issue] = compare(ref_plan, deployed, now=outside)
        assert issue.kind == "mismatch" and "MinCapacity is 12, plan says 1" in issue.message, issue
        assert "Europe/Berlin" in issue.message and f"{ENDPOINT}-floor-1000" in issue.message


def _window_around_now(monkeypatch, raised: int, released: int) -> None:
    """Daily floors in UTC whose raised window holds the present hour with hours to spare: a raise
    to ``raised`` two hours ago and a release to ``released`` three hours from now (times of day,
    so the verdict is the same at any hour)."""
    now = datetime.now(UTC)
    up, down = (now.hour - 2) % 24, (now.hour + 3) % 24

    def floors(plan, endpoint_name):
        return tuple(scaling.ScheduledActionSpec(name=f"{endpoint_name}-floor-{h:02d}00", schedule=f"cron(0 {h} * * ? *)",
                                                 timezone="UTC", min_capacity=n) for h, n in ((up, raised), (down, released)))

    monkeypatch.setattr(scaling, "floor_actions", floors)


def test_a_scheduled_target_keeps_the_plans_cap_and_the_floor_in_force_now(before, monkeypatch, aws_env, ref_plan):
    """Issue 46 item 2: with a schedule the target ignored changes to MaxCapacity too, so a re-plan
    that raised the cap reached AWS only when the next scheduled action ran (each action set both);
    and a target updated inside a raised window was registered with the plan's floor. Now the
    actions set only MinCapacity, the cap is the target's, from the plan, and the target is
    registered with the floor in force at deploy (the rule drift uses)."""
    _window_around_now(monkeypatch, raised=12, released=1)
    resources, result = preview_resources(ROOT / "Pulumi.dev.yaml", "dev")
    [target] = [r for r in resources if r.type == "aws:appautoscaling/target:Target"]
    registered = result.named(target.name)
    assert "maxCapacity" not in registered.ignore_changes and "minCapacity" not in registered.ignore_changes
    [unscheduled] = [r for r in before if r.type == "aws:appautoscaling/target:Target"]
    assert target.props["maxCapacity"] == unscheduled.props["maxCapacity"]  # the plan's cap, as without floors
    assert target.props["minCapacity"] == 12  # inside the raised window now
    actions = [r for r in resources if r.type == rules.T_SCHEDULED]
    assert len(actions) == 2 and all("maxCapacity" not in a.props["scalableTargetAction"] for a in actions)
    # The pack accepts the floor in force, and still names a hand-set one.
    assert _pack(resources) == []
    low = [dataclasses.replace(r, props={**r.props, "minCapacity": 3}) if r is target else r for r in resources]
    [msg] = _pack(low)
    assert "minCapacity is 3, expected 12" in msg
    # AWS: the scheduled actions carry no MaxCapacity and drift accepts that.
    create_endpoint(aws_env)
    deploy_scaling(aws_env, ref_plan)
    _raised(aws_env, ENDPOINT, 12)
    assert compare(ref_plan, aws.read_deployed(aws_env, ENDPOINT)) == []
