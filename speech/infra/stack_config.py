"""Stack config -> typed :class:`speech.schema.config.StackConfig`. The only module that reads
``pulumi.Config``; everything after this point works on validated pydantic models.

Every mistake becomes one :class:`speech.errors.ConfigError` whose message starts with the full
config key (``speech-endpoints:models.kokoro-82m.plan.surge_ratio: ...``), never a traceback.
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Mapping

from pydantic import ValidationError

from speech.schema.config import StackConfig
from speech.errors import ConfigError, describe_validation_error

PROJECT = "speech-endpoints"
KNOWN_KEYS = ("models", "allow_config_mismatch", "alerts", "budget")


def _key_of(loc: tuple[Any, ...]) -> str:
    # pydantic's location ("models", "kokoro-82m", "plan", "surge_ratio") is the config path.
    if loc and loc[0] in KNOWN_KEYS:
        head, rest = f"{PROJECT}:{loc[0]}", loc[1:]
    else:
        head, rest = f"{PROJECT}:models", loc
    return ".".join([head, *(str(p) for p in rest)])


def parse_stack_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate raw project config (keys without the ``speech-endpoints:`` prefix, values parsed).

    Pure, so tests and the offline preview share the exact error texts with the program.
    """
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(
            f"{PROJECT}:{unknown[0]}: unknown config key; this project reads {', '.join(f'{PROJECT}:{k}' for k in KNOWN_KEYS)}"
        )
    if raw.get("models") is None:
        raise ConfigError(
            f"{PROJECT}:models: missing; add a model with `python -m bench plan ... --stack <stack>` "
            "or write it into Pulumi.<stack>.yaml"
        )
    try:
        return StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, key=_key_of)) from None


def raw_project_config() -> dict[str, Any]:
    """All ``speech-endpoints:*`` values the engine passed in, JSON-decoded where structured."""
    from pulumi.runtime import config as rc

    keys = set(rc.CONFIG.get()) | set(rc.get_config_env())
    raw: dict[str, Any] = {}
    for full in sorted(keys):
        if not full.startswith(f"{PROJECT}:"):
            continue
        key = full.split(":", 1)[1]
        value = rc.get_config(full)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                # A bare string: structured keys then fail validation with their own key name.
                pass
        raw[key] = value
    return raw


def load_stack_config() -> StackConfig:
    """Read the current stack's config (under ``pulumi preview/up`` or Pulumi's mocks)."""
    return parse_stack_config(raw_project_config())
