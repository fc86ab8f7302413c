"""A client team's Pulumi program: reads the speech stack's outputs (README "Stack outputs") through
a StackReference and grants its own service role the right to call one model's endpoint.

    pulumi config set producer <org>/speech-endpoints/<stack>
    pulumi config set model kokoro-82m
    pulumi config set role my-service-role
"""

from __future__ import annotations

import pulumi
from consumer import define

cfg = pulumi.Config()
define(cfg.require("producer"), cfg.require("model"), cfg.require("role"))
