"""The program's config reader (speech.infra.stack_config): every ``speech-endpoints:*`` key the
program was given, read with ``pulumi.Config``, whichever way it arrived: the engine's JSON bag in
``PULUMI_CONFIG`` (how ``pulumi preview/up`` passes it) or ``pulumi.runtime.set_all_config`` (how
Pulumi's mocks and the offline preview pass it)."""

from __future__ import annotations

import json

import pulumi
import pytest

from speech.infra.stack_config import configured_keys, raw_project_config

MODELS = {"kokoro-82m": {"instance_type": "ml.g5.xlarge"}}


@pytest.fixture
def no_runtime_config():
    # The offline preview leaves its config in the SDK's map; start each case without it.
    pulumi.runtime.set_all_config({}, [])
    yield
    pulumi.runtime.set_all_config({}, [])


def test_the_engines_bag_is_read(monkeypatch, no_runtime_config):
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({
        "speech-endpoints:models": json.dumps(MODELS),
        "speech-endpoints:note": "a bare string",
        "aws:region": "eu-west-1",
    }))
    assert "aws:region" in configured_keys()
    # Another project's keys are not ours; a structured value is decoded, a bare string kept.
    assert raw_project_config() == {"models": MODELS, "note": "a bare string"}


def test_config_set_in_process_is_read(monkeypatch, no_runtime_config):
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    pulumi.runtime.set_all_config({"speech-endpoints:models": json.dumps(MODELS), "speech-endpoints:budget": "12"}, [])
    assert raw_project_config() == {"budget": 12, "models": MODELS}


def test_nothing_given_is_nothing_read(monkeypatch, no_runtime_config):
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert raw_project_config() == {}
