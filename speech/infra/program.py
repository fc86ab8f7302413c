"""The Pulumi program: stack config -> plan and gate every model -> one :class:`SpeechModel` per
model -> the stack outputs.

``__main__.py`` calls :func:`main`; the offline preview and the tests call :func:`define_stack`
under Pulumi's mocks, so all three run exactly this code. What one model deploys is
:mod:`speech.infra.components.model`.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from speech.deploy.gate import ModelDeployment, plan_models
from speech.deploy.hosting import endpoint_name as checked_endpoint_name
from speech.deploy.outputs import OUTPUTS_VERSION, observability_output
from speech.errors import SpeechError
from speech.infra.components import SpeechModel, SpeechModelArgs
from speech.infra.components.inference import native_provider
from speech.infra.components.observability import AlarmTopic, AlarmTopicArgs
from speech.infra.stack_config import load_stack_config
from speech.schema.config import StackConfig


def endpoint_name(model: str) -> str:
    return checked_endpoint_name(pulumi.get_stack(), model)


def plan_stack(config: StackConfig) -> dict[str, ModelDeployment]:
    """Plan and gate every model before creating anything, on the one plan-then-budget path
    (:func:`speech.deploy.gate.plan_and_budget`: budget caps, weights against instances): a bad model
    stops the whole preview."""
    return plan_models(config, {name: endpoint_name(name) for name in config.models})


def define_stack(config: StackConfig, gates: dict | None = None) -> dict[str, pulumi.Output]:
    """Create every model's resources and export the outputs contract (speech.deploy.outputs, README).

    ``gates``: filled with each model's final gate decision (an Output while receipts are read)."""
    deployments = plan_stack(config)
    on_k8s = {n: d for n, d in deployments.items() if d.config.hosting == "kubernetes"}
    on_aws = {n: d for n, d in deployments.items() if n not in on_k8s}
    outputs: dict[str, pulumi.Output] = {"outputs_version": pulumi.Output.from_input(OUTPUTS_VERSION)}
    if on_aws:
        outputs.update(_define_sagemaker(config, on_aws, gates))
    if on_k8s:
        # A stack of Kubernetes models alone makes no AWS call (no alarm topic, no account lookup).
        from speech.infra.components.kubernetes import KubernetesModel, KubernetesModelArgs

        k8s = {name: KubernetesModel(name, KubernetesModelArgs(deployment=dep, name=endpoint_name(name)))
               for name, dep in on_k8s.items()}
        if gates is not None:
            gates.update({m: dep.gate for m, dep in on_k8s.items()})
        outputs["kubernetes"] = pulumi.Output.from_input({m: part.summary for m, part in k8s.items()})
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs


def _define_sagemaker(config: StackConfig, deployments: dict[str, ModelDeployment], gates: dict | None) -> dict[str, pulumi.Output]:
    """The SageMaker models' resources and their parts of the outputs (endpoints, scaling, observability)."""
    account_id = aws.get_caller_identity_output().account_id
    region = aws.get_region_output().region
    topic = AlarmTopic("alarms", AlarmTopicArgs(alerts=config.alerts, account_id=account_id,
                                                tags={"speech:stack": pulumi.get_stack()}))
    # pulumi-aws-native only for the inference components, in pulumi-aws's region.
    native = (native_provider("aws-native", region)
              if any(dep.config.hosting == "components" for dep in deployments.values()) else None)
    parts = {
        name: SpeechModel(name, SpeechModelArgs(deployment=dep, endpoint_name=endpoint_name(name), account_id=account_id,
                                                region=region, topic_arn=topic.topic.arn,
                                                allow_config_mismatch=config.allow_config_mismatch, native=native)).outputs
        for name, dep in deployments.items()
    }
    if gates is not None:
        gates.update({m: p.gate for m, p in parts.items()})
    return {
        "endpoints": pulumi.Output.all(**{m: p.endpoint for m, p in parts.items()}),
        "scaling": pulumi.Output.from_input({m: p.scaling for m, p in parts.items()}),
        "observability": pulumi.Output.all(
            topic.topic.arn,
            pulumi.Output.all(**{m: p.dashboard for m, p in parts.items()}),
            pulumi.Output.all(**{m: p.alarms for m, p in parts.items()}),
        ).apply(lambda v: observability_output(topic_arn=v[0], dashboards=v[1], alarms=v[2])),
    }


def main() -> None:
    """Entry point of ``pulumi preview/up``: user mistakes end as one clean line, no traceback."""
    try:
        define_stack(load_stack_config())
    except SpeechError as err:
        raise pulumi.RunError(f"{err.__class__.__name__}: {err}") from None
