"""`bench drift` on a batch route, against moto: the asynchronous endpoint's backlog scaling is
compared with the batch plan rebuilt from the stack config, and real-time scaling on it is unplanned."""

from __future__ import annotations

import pytest

from bench.aws import client as aws
from bench.cli.main import main
from speech.deploy.scaling import batch_scaling_spec
from speech.plan.batch import build_batch_plan
from speech.stack.write import write_model_entry

from ..conftest import ENDPOINT, STACK, _step_config, create_endpoint, deploy_scaling

INPUTS = {"peak_rps": 50.0, "trough_rps": 1.0, "max_delay_s": 900.0}


def _batch_config(model_config):
    return model_config.model_copy(update={"priority": "batch", "hosting": "async",
                                           "plan": model_config.plan.model_copy(update=INPUTS)})


def deploy_batch_scaling(sess, plan) -> None:
    """What the program creates for a batch plan (speech.infra.components.autoscaling.AsyncScaling), with the AWS API's keys."""
    spec = batch_scaling_spec(plan, ENDPOINT)
    aas, cw = sess.client("application-autoscaling"), sess.client("cloudwatch")
    t = spec.target
    common = dict(ServiceNamespace=t.service_namespace, ResourceId=t.resource_id, ScalableDimension=t.scalable_dimension)
    aas.register_scalable_target(**common, MinCapacity=t.min_capacity, MaxCapacity=t.max_capacity)
    b = spec.backlog
    aas.put_scaling_policy(PolicyName=b.name, PolicyType=b.policy_type, **common,
                           TargetTrackingScalingPolicyConfiguration={
                               "TargetValue": b.target_value, "ScaleOutCooldown": b.scale_out_cooldown_s,
                               "ScaleInCooldown": b.scale_in_cooldown_s,
                               "CustomizedMetricSpecification": {
                                   "MetricName": b.metric_name, "Namespace": b.namespace, "Statistic": b.statistic,
                                   "Dimensions": [{"Name": k, "Value": v} for k, v in b.dimensions]}})
    arn = aas.put_scaling_policy(PolicyName=spec.wake.name, PolicyType=spec.wake.policy_type, **common,
                                 StepScalingPolicyConfiguration=_step_config(spec.wake))["PolicyARN"]
    a = spec.wake_alarm
    cw.put_metric_alarm(AlarmName=a.name, Namespace=a.namespace, MetricName=a.metric_name, Statistic=a.statistic,
                        Dimensions=[{"Name": k, "Value": v} for k, v in a.dimensions], Period=a.period_s,
                        EvaluationPeriods=a.evaluation_periods, DatapointsToAlarm=a.datapoints_to_alarm,
                        Threshold=a.threshold, ComparisonOperator=a.comparison, TreatMissingData=a.treat_missing_data,
                        AlarmActions=[arn])


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_drift_batch_route(aws_env, tmp_path, capsys, model_config):
    cfg = _batch_config(model_config)
    m = cfg.measurements
    plan = build_batch_plan(m.qmax, m.ttotal, cfg.plan)
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", cfg)
    create_endpoint(aws_env)
    deploy_batch_scaling(aws_env, plan)
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 0, capsys.readouterr().out
    assert "preflight-ok" in capsys.readouterr().out

    # An edit of the backlog target after deploy is drift.
    pol = next(p for p in aws.scaling_policies(aws_env, ENDPOINT) if p["PolicyName"].endswith("-backlog"))
    tt = dict(pol["TargetTrackingScalingPolicyConfiguration"], TargetValue=5.0)
    aws_env.client("application-autoscaling").put_scaling_policy(
        PolicyName=pol["PolicyName"], ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(ENDPOINT),
        ScalableDimension=aws.DIMENSION, PolicyType="TargetTrackingScaling", TargetTrackingScalingPolicyConfiguration=tt)
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"TargetValue is 5.0, plan says {plan.backlog_target_per_instance}" in out


def test_realtime_scaling_on_a_batch_endpoint_is_unplanned(aws_env, tmp_path, capsys, model_config, ref_plan):
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", _batch_config(model_config))
    create_endpoint(aws_env)
    deploy_scaling(aws_env, ref_plan)  # the real-time policies, on what the stack says is a batch route
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "[orphan_policy] policy test-kokoro-82m-scale-out" in out and "scales on its backlog only" in out
    assert "[missing_policy] no *-wake policy is deployed: nothing wakes the endpoint from zero" in out
    assert "MinCapacity is 1, plan says 0" in out
