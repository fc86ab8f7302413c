"""Observability of one endpoint: a dashboard and the alarms that page or roll a deploy back."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from ..artifacts import PlanArtifact
from ..scaling import METRIC, METRIC_NAMESPACE, VARIANT
from .iam import EMF_NAMESPACE

SM = METRIC_NAMESPACE


def dashboard_body(
    *, endpoint_name: str, model: str, region: str, plan: PlanArtifact | None, slo_ms: float
) -> dict[str, Any]:
    """Concurrency vs both thresholds, TTFAB p95 vs SLO, instances, 503s, pressure index."""
    ep = ["EndpointName", endpoint_name, "VariantName", VARIANT]

    def widget(title: str, metrics: list, annotations: list, x: int, y: int) -> dict[str, Any]:
        props: dict[str, Any] = {"title": title, "region": region, "view": "timeSeries", "stacked": False,
                                 "metrics": metrics, "period": 10}
        if annotations:
            props["annotations"] = {"horizontal": annotations}
        return {"type": "metric", "x": x, "y": y, "width": 12, "height": 6, "properties": props}

    thresholds = []
    if plan is not None:
        thresholds = [
            {"label": "scale-out target (C_scale_max)", "value": plan.thresholds.scaling_target_value},
            {"label": "scale-in threshold (C_scale_min)", "value": plan.thresholds.scale_in_threshold},
            {"label": "Q_max (saturation)", "value": plan.alarms.saturation_concurrency},
        ]
    return {
        "widgets": [
            widget("Concurrency per instance vs thresholds",
                   [[SM, METRIC, *ep, {"stat": "Maximum"}]], thresholds, 0, 0),
            widget("TTFAB p95 vs SLO (ms)",
                   [[EMF_NAMESPACE, "TTFABp95", "Model", model, {"stat": "Maximum"}]],
                   [{"label": "SLO", "value": slo_ms}], 12, 0),
            widget("Instances",
                   [["/aws/sagemaker/Endpoints", "CPUUtilization", "EndpointName", endpoint_name, "VariantName",
                     VARIANT, {"stat": "SampleCount", "label": "instances reporting"}]], [], 0, 6),
            widget("503 / rejections",
                   [[SM, "Invocation5XXErrors", *ep, {"stat": "Sum"}],
                    [EMF_NAMESPACE, "Rejected", "Model", model, {"stat": "Sum"}]], [], 12, 6),
            widget("Pressure index (0-100)",
                   [[EMF_NAMESPACE, "PressureIndex", "Model", model, {"stat": "Maximum"}]], [], 0, 12),
        ]
    }


class ObservabilityArgs:
    def __init__(
        self,
        *,
        model: str,
        endpoint_name: str,
        region: pulumi.Input[str],
        plan: PlanArtifact | None,
        slo_ms: float,
        tags: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        """Model key: the container's EMF ``Model`` dimension."""
        self.endpoint_name = endpoint_name
        """Endpoint name (known at preview)."""
        self.region = region
        """Region the dashboard's widgets read from."""
        self.plan = plan
        """The plan, when measured: alarm thresholds. Without it only the error alarm exists."""
        self.slo_ms = slo_ms
        """p95 TTFAB objective, milliseconds."""
        self.tags = tags or {}
        """Tags for the alarms."""


class Observability(pulumi.ComponentResource):
    rollback_alarm_names: list[pulumi.Output[str]]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ep = args.endpoint_name
        dims = {"EndpointName": ep, "VariantName": VARIANT}
        emf = {"Model": args.model}
        p = args.plan

        self.errors_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-errors",
            name=f"{ep}-5xx",
            alarm_description="server errors (incl. 503 queue_saturated) on the endpoint; rolls a canary back",
            namespace=SM, metric_name="Invocation5XXErrors", dimensions=dims, statistic="Sum",
            period=60, evaluation_periods=3, datapoints_to_alarm=2, threshold=5,
            comparison_operator="GreaterThanThreshold", treat_missing_data="notBreaching",
            tags=args.tags, opts=child,
        )
        self.slo_alarm = aws.cloudwatch.MetricAlarm(
            f"{name}-slo",
            name=f"{ep}-ttfab-slo",
            alarm_description=f"TTFAB p95 above the SLO {args.slo_ms:g} ms; rolls a canary back",
            namespace=EMF_NAMESPACE, metric_name="TTFABp95", dimensions=emf, statistic="Maximum",
            period=60, evaluation_periods=3, datapoints_to_alarm=3, threshold=args.slo_ms,
            comparison_operator="GreaterThanThreshold", treat_missing_data="notBreaching",
            tags=args.tags, opts=child,
        )
        self.rollback_alarm_names = [self.errors_alarm.name, self.slo_alarm.name]

        self.first_chunk_alarm = self.saturation_alarm = None
        if p is not None:
            self.first_chunk_alarm = aws.cloudwatch.MetricAlarm(
                f"{name}-first-chunk",
                name=f"{ep}-first-chunk-latency-p95",
                alarm_description=f"FirstChunkLatencyP95 above the measured uncontended p95 "
                f"{p.alarms.ttfab_p95_alarm_ms:g} ms: the instance is slower than when it was measured",
                namespace=EMF_NAMESPACE, metric_name="TTFABp95", dimensions=emf, statistic="Minimum",
                period=60, evaluation_periods=5, datapoints_to_alarm=5, threshold=p.alarms.ttfab_p95_alarm_ms,
                comparison_operator="GreaterThanThreshold", treat_missing_data="notBreaching",
                tags=args.tags, opts=child,
            )
            self.saturation_alarm = aws.cloudwatch.MetricAlarm(
                f"{name}-saturation",
                name=f"{ep}-saturation",
                alarm_description=f"an instance at Q_max ({p.alarms.saturation_concurrency:g} in flight): "
                "requests beyond it get 503 queue_saturated",
                namespace=SM, metric_name=METRIC, dimensions=dims, statistic="Maximum",
                period=p.alarms.metric_period_s, evaluation_periods=p.alarms.datapoints_to_alarm,
                datapoints_to_alarm=p.alarms.datapoints_to_alarm, threshold=p.alarms.saturation_concurrency,
                comparison_operator="GreaterThanOrEqualToThreshold", treat_missing_data="notBreaching",
                tags=args.tags, opts=child,
            )

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
        self.register_outputs({"dashboard": self.dashboard.dashboard_name})
