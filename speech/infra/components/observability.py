"""Observability: the stack's alarm topic, and per endpoint a dashboard and the alarms that notify
someone (and, for two of them, roll a blue/green deployment back).

Every alarm is first an :class:`OpsAlarm` built by a pure function (:func:`ops_alarms`), then
rendered into an ``aws.cloudwatch.MetricAlarm``; tests evaluate the same definitions against
synthetic metric series (:mod:`speech.deploy.alarm_eval`). The container metrics' namespace, dimensions
and names come from :mod:`container.telemetry`, the one definition the container emits with.

The scaling alarms (``<endpoint>-scale-in``, ``-surge``, :mod:`speech.infra.components.autoscaling`)
act through their scaling policies only and do not notify: scale-in is routine, and the surge's
condition (an instance at Q_max) has its own notifying alarm here, ``<endpoint>-saturation``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from container import telemetry
from speech.deploy.iam import alarm_topic_key_policy, metrics_reader_policy
from speech.deploy.scaling import METRIC, METRIC_NAMESPACE, VARIANT, metric_dimensions, surge_statistic, surge_threshold
from speech.plan.calibration import expected_rejection_fraction
from speech.schema.config import Alerts
from speech.schema.plan_artifacts import PlanArtifact

SM = METRIC_NAMESPACE
SM_INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
"""Instance metrics of SageMaker endpoints (CPU, GPU and memory utilisation)."""

SLOWDOWN_MARGIN = 0.5
"""The slowdown alarm fires above the measured uncontended p95 x (1 + this): 50 % slower than when
it was measured. A service-time p95 over a 10 s flush of an instance at the planned load sits
near the uncontended value (queueing is excluded); half again is beyond its run-to-run spread in
the reference ladder, and a 2x slower instance is well past it."""
SLOWDOWN_PERIOD_S = 60
SLOWDOWN_EVALUATION_PERIODS = 5
SLOWDOWN_DATAPOINTS = 4
"""4 of 5 minutes: one noisy minute (a cold cache, a long sentence mix) does not page."""
ERRORS_5XX_RATE_PERCENT = 1.0
"""Server errors above 1 % of invocations for 3 of 5 minutes: something is broken."""
ERRORS_4XX_RATE_PERCENT = 5.0
"""Client errors above 5 %: a client sends requests the contract refuses (bad voice, too long)."""
MODEL_ERRORS_PER_MINUTE = 5
"""InvocationModelErrors (the container answered non-2xx or failed) per minute, 2 of 3 minutes."""

Comparison = Literal["GreaterThanThreshold", "GreaterThanOrEqualToThreshold", "LessThanThreshold",
                     "LessThanOrEqualToThreshold"]


@dataclass(frozen=True)
class MetricQuery:
    """One query of a metric-math alarm: a metric (namespace, name, dimensions, stat) or an expression."""

    id: str
    expression: str | None = None
    namespace: str | None = None
    metric_name: str | None = None
    dimensions: tuple[tuple[str, str], ...] = ()
    stat: str | None = None
    return_data: bool = False


def _metric_args(q: MetricQuery, period_s: int) -> aws.cloudwatch.MetricAlarmMetricQueryMetricArgs:
    """The metric of a metric query (one without an expression names its metric and statistic)."""
    if q.metric_name is None or q.stat is None:
        raise ValueError(f"metric query {q.id!r} has neither an expression nor a metric name and statistic")
    return aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(namespace=q.namespace, metric_name=q.metric_name,
                                                           dimensions=dict(q.dimensions), stat=q.stat, period=period_s)


@dataclass(frozen=True)
class OpsAlarm:
    """An operational alarm of one endpoint, in CloudWatch's terms."""

    key: str
    """Stable key (``slowdown``, ``errors_5xx_rate``, ...): the outputs map keys to alarm names."""
    name: str
    description: str
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: Comparison
    treat_missing_data: Literal["notBreaching", "breaching", "ignore", "missing"] = "notBreaching"
    namespace: str | None = None
    metric_name: str | None = None
    dimensions: tuple[tuple[str, str], ...] = ()
    statistic: str | None = None
    queries: tuple[MetricQuery, ...] = ()
    rollback: bool = False
    """Also rolls a blue/green deployment back (the endpoint's auto-rollback alarms)."""


def container_dimensions(endpoint_name: str, model: str) -> dict[str, str]:
    """Dimensions of one endpoint variant's container metrics: exactly what the container emits
    (:func:`container.telemetry.dimensions` with the environment the program sets)."""
    return telemetry.dimensions(endpoint_name, VARIANT, model)


def model_environment(endpoint_name: str) -> dict[str, str]:
    """The container environment that makes its EMF dimensions :func:`container_dimensions`."""
    return {telemetry.ENV_ENDPOINT: endpoint_name, telemetry.ENV_VARIANT: VARIANT}


def slowdown_threshold_ms(plan: PlanArtifact) -> float:
    """Measured uncontended p95 TTFAB x (1 + :data:`SLOWDOWN_MARGIN`), milliseconds."""
    return round(plan.alarms.ttfab_p95_alarm_ms * (1 + SLOWDOWN_MARGIN), 3)


def _rate(key: str, name: str, description: str, numerator: list[MetricQuery], denominator: list[MetricQuery],
          threshold_percent: float, evaluation_periods: int, datapoints: int) -> OpsAlarm:
    num = "+".join(q.id for q in numerator)
    den = "+".join(q.id for q in denominator)
    # IF(...): no arrivals is no rate (0), never a division by zero that CloudWatch drops.
    expr = MetricQuery(id="rate", expression=f"IF(({den}) > 0, 100 * ({num}) / ({den}), 0)", return_data=True)
    return OpsAlarm(key=key, name=name, description=description, period_s=60,
                    evaluation_periods=evaluation_periods, datapoints_to_alarm=datapoints,
                    threshold=threshold_percent, comparison="GreaterThanThreshold",
                    queries=(*{q.id: q for q in (*numerator, *denominator)}.values(), expr))


Hosting = Literal["realtime", "async", "components", "kubernetes"]
"""speech.schema.config.Hosting; a Kubernetes model has no SageMaker observability (never passed here)."""

ASYNC_UNPUBLISHED = ("Invocations", "InvocationsPerInstance", "OverheadLatency")
"""SageMaker metrics an asynchronous endpoint does not publish (SageMaker developer guide, "Alarms
and logs for tracking metrics from asynchronous endpoints"): no alarm of such a route may read them."""


def _server_errors(ep: str, sm_dims: tuple, c_dims: tuple) -> OpsAlarm:
    """Server errors that are not the designed overload answer: Invocation5XXErrors less the
    container's own 503 queue_saturated count (EMF, same minute). A surge the plan lets through
    (expected_rejection_fraction) during a deployment is load, not a broken update, and must not roll
    it back. FILL(..., 0): a minute without either series counts 0, so the difference stays defined."""
    e5 = MetricQuery(id="e5", namespace=SM, metric_name="Invocation5XXErrors", dimensions=sm_dims, stat="Sum")
    rej = MetricQuery(id="rej", namespace=telemetry.NAMESPACE, metric_name=telemetry.REJECTED, dimensions=c_dims, stat="Sum")
    expr = MetricQuery(id="failed", expression="IF(FILL(e5, 0) > FILL(rej, 0), FILL(e5, 0) - FILL(rej, 0), 0)",
                       return_data=True)
    return OpsAlarm(
        key="errors_5xx", name=f"{ep}-5xx", rollback=True,
        description="server errors other than the designed 503 queue_saturated (Invocation5XXErrors minus the "
                    "container's rejections); rolls a deployment back",
        period_s=60, evaluation_periods=3, datapoints_to_alarm=2, threshold=5,
        comparison="GreaterThanThreshold", queries=(e5, rej, expr),
    )


def reads_container_metrics(alarm: OpsAlarm) -> bool:
    """True when the alarm reads the container's own EMF metrics (namespace ``telemetry.NAMESPACE``),
    which exist only if the container's log lines reach CloudWatch Logs."""
    return alarm.namespace == telemetry.NAMESPACE or any(q.namespace == telemetry.NAMESPACE for q in alarm.queries)


def container_log_group(endpoint_name: str, hosting: Hosting) -> str:
    """Where the containers' stdout goes, so where their EMF metrics come from: an endpoint's
    variant logs to /aws/sagemaker/Endpoints/<endpoint>, an inference component (named like its
    endpoint) to /aws/sagemaker/InferenceComponents/<component>."""
    if hosting == "components":
        return f"/aws/sagemaker/InferenceComponents/{endpoint_name}"
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def ops_alarms(*, endpoint_name: str, model: str, plan: PlanArtifact | None, slo_ms: float,
               hosting: Hosting = "realtime") -> list[OpsAlarm]:
    """:func:`_ops_alarms`, each alarm that reads container metrics saying so in its description: with
    no log lines in its log group it sees no data (missing, not an OK signal)."""
    group = container_log_group(endpoint_name, hosting)
    return [dataclasses.replace(a, description=f"{a.description}. Reads the container's EMF metrics, logged to {group}: "
                                               "no data there (the execution role cannot write that group) means this "
                                               "alarm sees nothing")
            if reads_container_metrics(a) else a
            for a in _ops_alarms(endpoint_name=endpoint_name, model=model, plan=plan, slo_ms=slo_ms, hosting=hosting)]


def _ops_alarms(*, endpoint_name: str, model: str, plan: PlanArtifact | None, slo_ms: float,
                hosting: Hosting = "realtime") -> list[OpsAlarm]:
    """Every operational alarm of one endpoint. Without a plan the ones with planned thresholds
    (slowdown, saturation, queue_saturated rate) do not exist: there is nothing measured to compare with.

    ``hosting: async`` (a batch route): no TTFAB SLO alarm (a job's first byte is its whole file, so
    it sits above any real-time SLO under a normal backlog and would roll back every update) and no
    rate over Invocations (not published for asynchronous endpoints, :data:`ASYNC_UNPUBLISHED`); the
    batch route's own delay alarm is in :mod:`speech.infra.components.batch_io`."""
    ep = endpoint_name
    sm_dims = tuple(sorted(metric_dimensions(ep).items()))
    c_dims = tuple(container_dimensions(ep, model).items())

    def sm(id_: str, metric: str) -> MetricQuery:
        return MetricQuery(id=id_, namespace=SM, metric_name=metric, dimensions=sm_dims, stat="Sum")

    def emf(id_: str, metric: str) -> MetricQuery:
        return MetricQuery(id=id_, namespace=telemetry.NAMESPACE, metric_name=metric, dimensions=c_dims, stat="Sum")

    alarms = [
        _server_errors(ep, sm_dims, c_dims),
        OpsAlarm(
            key="ttfab_slo", name=f"{ep}-ttfab-slo", rollback=True,
            description=f"TTFAB p95 above the SLO {slo_ms:g} ms; rolls a canary back",
            namespace=telemetry.NAMESPACE, metric_name=telemetry.TTFAB_P95, dimensions=c_dims, statistic="Maximum",
            period_s=60, evaluation_periods=3, datapoints_to_alarm=3, threshold=slo_ms,
            comparison="GreaterThanThreshold",
        ),
        _rate("errors_5xx_rate", f"{ep}-5xx-rate",
              f"5xx answers above {ERRORS_5XX_RATE_PERCENT:g} % of invocations",
              [sm("e5", "Invocation5XXErrors")], [sm("inv", "Invocations")], ERRORS_5XX_RATE_PERCENT, 5, 3),
        _rate("errors_4xx_rate", f"{ep}-4xx-rate",
              f"4xx answers above {ERRORS_4XX_RATE_PERCENT:g} % of invocations: clients send requests the API refuses",
              [sm("e4", "Invocation4XXErrors")], [sm("inv", "Invocations")], ERRORS_4XX_RATE_PERCENT, 5, 3),
    ]
    if hosting == "async":
        alarms = [a for a in alarms if a.key not in ("ttfab_slo", "errors_5xx_rate", "errors_4xx_rate")]
    alarms += [
        OpsAlarm(
            key="model_errors", name=f"{ep}-model-errors",
            description=f"more than {MODEL_ERRORS_PER_MINUTE} InvocationModelErrors a minute: the container fails requests",
            namespace=SM, metric_name="InvocationModelErrors", dimensions=sm_dims, statistic="Sum",
            period_s=60, evaluation_periods=3, datapoints_to_alarm=2, threshold=MODEL_ERRORS_PER_MINUTE,
            comparison="GreaterThanThreshold",
        ),
    ]
    if plan is None:
        return alarms
    expected = expected_rejection_fraction(plan)
    alarms += [
        OpsAlarm(
            key="slowdown", name=f"{ep}-slowdown",
            description=f"service time p95 (queueing excluded) above the measured uncontended p95 "
            f"{plan.alarms.ttfab_p95_alarm_ms:g} ms + {100 * SLOWDOWN_MARGIN:g} %: the instances are slower than "
            "when they were measured; re-measure (bench qmax) before trusting the scaling plan",
            namespace=telemetry.NAMESPACE, metric_name=telemetry.SERVICE_P95, dimensions=c_dims, statistic="Average",
            period_s=SLOWDOWN_PERIOD_S, evaluation_periods=SLOWDOWN_EVALUATION_PERIODS,
            datapoints_to_alarm=SLOWDOWN_DATAPOINTS, threshold=slowdown_threshold_ms(plan),
            comparison="GreaterThanThreshold",
        ),
        OpsAlarm(
            key="saturation", name=f"{ep}-saturation",
            # the surge alarm's own condition (speech.deploy.scaling.realtime), told to the team
            description=(f"an instance at Q_max ({plan.alarms.saturation_concurrency:g} in flight): requests beyond it "
                         "get 503 queue_saturated" if plan.inputs.surge_average_share is None else
                         f"the instances' average concurrency reached {surge_threshold(plan):g} "
                         f"({plan.inputs.surge_average_share:g} x Q_max): the traffic outgrew the scheduled floors"),
            namespace=SM, metric_name=METRIC, dimensions=sm_dims, statistic=surge_statistic(plan),
            period_s=plan.alarms.metric_period_s, evaluation_periods=plan.alarms.datapoints_to_alarm,
            datapoints_to_alarm=plan.alarms.datapoints_to_alarm, threshold=surge_threshold(plan),
            comparison="GreaterThanOrEqualToThreshold",
        ),
        _rate("queue_saturated_rate", f"{ep}-queue-saturated-rate",
              f"503 queue_saturated above {100 * expected:g} % of arrivals, what the plan's surge_survival lets through",
              [emf("rej", telemetry.REJECTED)], [emf("adm", telemetry.ADMITTED), emf("rej", telemetry.REJECTED)],
              round(100 * expected, 6), 5, 3),
    ]
    return alarms


def alarm_args(alarm: OpsAlarm, actions: list[pulumi.Input[str]], tags: dict[str, str]) -> dict[str, Any]:
    """``aws.cloudwatch.MetricAlarm`` arguments of one :class:`OpsAlarm` (names as in MetricAlarmArgs)."""
    args: dict[str, Any] = dict(
        name=alarm.name, alarm_description=alarm.description, evaluation_periods=alarm.evaluation_periods,
        datapoints_to_alarm=alarm.datapoints_to_alarm, threshold=alarm.threshold,
        comparison_operator=alarm.comparison, treat_missing_data=alarm.treat_missing_data,
        alarm_actions=actions, ok_actions=actions, tags=tags,
    )
    if alarm.queries:
        args["metric_queries"] = [
            aws.cloudwatch.MetricAlarmMetricQueryArgs(id=q.id, expression=q.expression, return_data=q.return_data)
            if q.expression else
            aws.cloudwatch.MetricAlarmMetricQueryArgs(id=q.id, return_data=q.return_data, metric=_metric_args(q, alarm.period_s))
            for q in alarm.queries
        ]
    else:
        args.update(namespace=alarm.namespace, metric_name=alarm.metric_name, dimensions=dict(alarm.dimensions),
                    statistic=alarm.statistic, period=alarm.period_s)
    return args


def dashboard_body(
    *, endpoint_name: str, model: str, region: str, plan: PlanArtifact | None, slo_ms: float
) -> dict[str, Any]:
    """Instances, concurrency vs both thresholds, TTFAB p95 vs SLO, service time vs the slowdown
    line, pressure index, rejections and errors, GPU utilisation and memory."""
    ep = ["EndpointName", endpoint_name, "VariantName", VARIANT]
    c = [x for kv in container_dimensions(endpoint_name, model).items() for x in kv]
    ns = telemetry.NAMESPACE

    def widget(title: str, metrics: list, annotations: list, x: int, y: int) -> dict[str, Any]:
        props: dict[str, Any] = {"title": title, "region": region, "view": "timeSeries", "stacked": False,
                                 "metrics": metrics, "period": 10}
        if annotations:
            props["annotations"] = {"horizontal": annotations}
        return {"type": "metric", "x": x, "y": y, "width": 12, "height": 6, "properties": props}

    thresholds, fleet, slow = [], [], []
    if plan is not None:
        thresholds = [
            {"label": "scale-out target (C_scale_max)", "value": plan.thresholds.scaling_target_value},
            {"label": "scale-in threshold (C_scale_min)", "value": plan.thresholds.scale_in_threshold},
            {"label": "Q_max (saturation)", "value": plan.alarms.saturation_concurrency},
        ]
        fleet = [{"label": "fleet min", "value": plan.fleet.min_instances},
                 {"label": "fleet max", "value": plan.fleet.max_instances}]
        slow = [{"label": "slowdown alarm", "value": slowdown_threshold_ms(plan)},
                {"label": "measured uncontended p95", "value": plan.alarms.ttfab_p95_alarm_ms}]
    return {
        "widgets": [
            # Application Auto Scaling publishes no desired-count metric: the in-service count is
            # the number of instances reporting, scaling activity is where it moves between the
            # plan's floor and ceiling.
            widget("Instances in service (scaling activity) vs fleet bounds",
                   [[SM_INSTANCE_NAMESPACE, "CPUUtilization", *ep,
                     {"stat": "SampleCount", "period": 60, "label": "instances reporting"}]], fleet, 0, 0),
            widget("ConcurrentRequestsPerModel vs target and scale-in threshold",
                   [[SM, METRIC, *ep, {"stat": "Maximum"}]], thresholds, 12, 0),
            widget("TTFAB p95 vs SLO (ms)", [[ns, telemetry.TTFAB_P95, *c, {"stat": "Maximum"}]],
                   [{"label": "SLO", "value": slo_ms}], 0, 6),
            widget("Service time p95 vs slowdown alarm (ms)", [[ns, telemetry.SERVICE_P95, *c, {"stat": "Average"}]],
                   slow, 12, 6),
            widget("Pressure index (0-100)", [[ns, telemetry.PRESSURE, *c, {"stat": "Maximum"}]], [], 0, 12),
            widget("Rejections (503 queue_saturated) and errors",
                   [[ns, telemetry.REJECTED, *c, {"stat": "Sum"}],
                    [SM, "Invocation5XXErrors", *ep, {"stat": "Sum"}],
                    [SM, "Invocation4XXErrors", *ep, {"stat": "Sum"}]], [], 12, 12),
            widget("GPU utilization and memory (%)",
                   [[SM_INSTANCE_NAMESPACE, "GPUUtilization", *ep, {"stat": "Average"}],
                    [SM_INSTANCE_NAMESPACE, "GPUMemoryUtilization", *ep, {"stat": "Maximum"}]], [], 0, 18),
        ]
    }


class AlarmTopicArgs:
    def __init__(self, *, alerts: Alerts, account_id: pulumi.Input[str], tags: dict[str, str] | None = None) -> None:
        self.alerts = alerts
        """Email and HTTPS subscriptions (``speech-endpoints:alerts``)."""
        self.account_id = account_id
        """The account whose IAM administers the topic's key."""
        self.tags = tags or {}
        """Tags for the topic."""


class AlarmTopic(pulumi.ComponentResource):
    """The stack's one SNS topic: every operational alarm notifies it on ALARM and on OK.

    Encrypted with a customer-managed key whose policy admits CloudWatch: CloudWatch publishes to
    an SSE-KMS topic only with kms:Decrypt and kms:GenerateDataKey* on its key, and the AWS-managed
    key alias/aws/sns grants neither to a service and cannot be changed (docs/design.md, alarm topic)."""

    topic: aws.sns.Topic
    key: aws.kms.Key

    def __init__(self, name: str, args: AlarmTopicArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:AlarmTopic", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.key = aws.kms.Key(
            f"{name}-key",
            description="alarm topic encryption: CloudWatch alarm actions may publish with it",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            policy=pulumi.Output.from_input(args.account_id).apply(lambda a: json.dumps(alarm_topic_key_policy(a))),
            tags=args.tags,
            opts=child,
        )
        self.topic = aws.sns.Topic(f"{name}-topic", kms_master_key_id=self.key.arn, tags=args.tags, opts=child)
        for i, addr in enumerate(args.alerts.email):
            aws.sns.TopicSubscription(f"{name}-email-{i}", topic=self.topic.arn, protocol="email", endpoint=addr,
                                      opts=child)
        for i, url in enumerate(args.alerts.https):
            aws.sns.TopicSubscription(f"{name}-https-{i}", topic=self.topic.arn, protocol="https", endpoint=url,
                                      endpoint_auto_confirms=False, opts=child)
        self.register_outputs({"topic_arn": self.topic.arn})


class ObservabilityArgs:
    def __init__(
        self,
        *,
        model: str,
        endpoint_name: str,
        region: pulumi.Input[str],
        plan: PlanArtifact | None,
        slo_ms: float,
        topic_arn: pulumi.Input[str],
        hosting: Hosting = "realtime",
        tags: dict[str, str] | None = None,
    ) -> None:
        self.hosting = hosting
        """How the model is hosted: which alarms apply (:func:`ops_alarms`)."""
        self.model = model
        """Model key: the container's EMF ``Model`` dimension."""
        self.endpoint_name = endpoint_name
        """Endpoint name (known at preview): the ``EndpointName`` dimension."""
        self.region = region
        """Region the dashboard's widgets read from."""
        self.plan = plan
        """The plan, when measured: alarm thresholds. Without it only the unplanned alarms exist."""
        self.slo_ms = slo_ms
        """p95 TTFAB objective, milliseconds."""
        self.topic_arn = topic_arn
        """The stack's alarm topic: every alarm here notifies it on ALARM and OK."""
        self.tags = tags or {}
        """Tags for the alarms."""


class Observability(pulumi.ComponentResource):
    rollback_alarm_names: list[pulumi.Output[str]]
    alarms: dict[str, aws.cloudwatch.MetricAlarm]
    """By :attr:`OpsAlarm.key`."""

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ep, p = args.endpoint_name, args.plan
        self.alarms = {
            a.key: aws.cloudwatch.MetricAlarm(
                f"{name}-{a.key.replace('_', '-')}", **alarm_args(a, [args.topic_arn], args.tags), opts=child)
            for a in ops_alarms(endpoint_name=ep, model=args.model, plan=p, slo_ms=args.slo_ms, hosting=args.hosting)
        }
        self.rollback_alarm_names = [self.alarms[a.key].name for a in ops_alarms(
            endpoint_name=ep, model=args.model, plan=p, slo_ms=args.slo_ms, hosting=args.hosting) if a.rollback]

        self.dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard",
            dashboard_name=ep,
            dashboard_body=pulumi.Output.from_input(args.region).apply(
                lambda r: json.dumps(
                    dashboard_body(endpoint_name=ep, model=args.model, region=r, plan=p, slo_ms=args.slo_ms)
                )
            ),
            opts=child,
        )
        # For whoever reads the dashboard, the container's scraped /metrics (CloudWatch's PromQL
        # endpoint) or runs bench observe: the read actions, named one by one.
        self.metrics_read_policy = aws.iam.Policy(
            f"{name}-metrics-read", name=f"{ep}-metrics-read", policy=json.dumps(metrics_reader_policy()), tags=args.tags,
            description=f"Read {ep}'s metrics: CloudWatch, and the container's /metrics through the PromQL endpoint",
            opts=child)
        self.dashboard_url = pulumi.Output.concat(
            "https://", args.region, ".console.aws.amazon.com/cloudwatch/home?region=", args.region,
            "#dashboards/dashboard/", ep)
        self.register_outputs({"dashboard": self.dashboard.dashboard_name})
