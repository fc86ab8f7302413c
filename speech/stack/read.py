"""Read a stack file (``Pulumi.<stack>.yaml``) or the program's raw config into a typed
:class:`speech.schema.config.StackConfig`; pure but for reading the stack file and the artifact
files it references, so the program, the pack and bench share one parser and its error texts.

Every mistake becomes one :class:`speech.errors.ConfigError` whose message starts with the full
config key (``speech-endpoints:models.kokoro-82m.plan.surge_ratio: ...``), never a traceback.

Measured artifacts are references in config (``{path, sha256}``, :class:`speech.schema.config.ArtifactRef`):
:func:`resolve_artifacts` reads each file relative to the stack file's directory, refuses one whose
bytes hash to anything but the recorded sha256, and puts its content where the artifact was
embedded before, so the program, the pack and bench validate exactly what they validated when
artifacts were embedded. Embedded artifacts still load, with one warning naming the migration
command. Keys of the project namespace this project does not read are the user's own: warned
about once, never fatal. The program's ``pulumi.Config`` reader is :mod:`speech.infra.stack_config`.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import ValidationError

from speech.errors import ArtifactError, ConfigError, describe_validation_error
from speech.schema.config import ARTIFACT_REF_KEYS, ArtifactRef, StackConfig
from speech.stack.names import PROJECT, stack_name

KNOWN_KEYS = ("models", "allow_config_mismatch", "alerts", "budget")
ARTIFACT_KINDS = ("qmax", "ttotal", "tcopy")
"""The keys of ``measurements`` that hold an artifact (a reference or, before migration, embedded)."""

Warn = Callable[[str], None]


def _stderr_warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# --- stack names and files ------------------------------------------------------------------------


def stack_file(stack_dir: Path, stack: str) -> Path:
    """``<stack_dir>/Pulumi.<name>.yaml`` for any of the stack name forms."""
    return Path(stack_dir) / f"Pulumi.{stack_name(stack)}.yaml"


def migrate_command(stack: str) -> str:
    return f"python -m bench plan --stack {stack} --migrate-config"


MAX_STACK_FILE_BYTES = 16 * 2**20
"""The largest stack file read (the dev stack, measurements embedded, is ~8 KiB)."""


def round_trip_yaml() -> Any:
    """The round-trip YAML bench writes stack files with (comments, quotes and order kept)."""
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def stack_text(path: Path) -> str | None:
    """The stack file's text, None when there is no such file; refused past
    :data:`MAX_STACK_FILE_BYTES` or when it cannot be read as UTF-8 text."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_STACK_FILE_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes, more than a stack file holds (at most "
                              f"{MAX_STACK_FILE_BYTES // 2**20} MiB); pass a Pulumi.<stack>.yaml")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err.__class__.__name__}); "
                          "pass a Pulumi.<stack>.yaml text file") from None


def parse_stack_text(path: Path, text: str, *, round_trip: bool = False) -> dict[str, Any]:
    """The one loader of a stack file's text: plain values (``round_trip=False``, for reading) or
    ruamel's round-trip containers (for writing the file back with its comments). Errors name file,
    line, column and the key (:func:`speech.files.yaml_error_message`); a .nan or .inf value is
    refused by its key path; the top level must be a mapping whose ``config`` is one."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from speech.files import non_finite_path, yaml_error_message

    try:
        data = (round_trip_yaml() if round_trip else YAML(typ="safe")).load(text)
    except YAMLError as err:
        raise ConfigError(yaml_error_message(path, err, text)) from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a stack file; fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level: expected a mapping with a 'config' key, found {type(data).__name__} "
                          f"{str(data)[:40]!r}; fix the file and re-run (nothing was written)")
    config = data.get("config")
    if config not in (None, "") and not isinstance(config, dict):
        raise ConfigError(f"{path}: config: expected a mapping, found {type(config).__name__} {str(config)[:40]!r}; "
                          "fix the file (or remove the key) and re-run (nothing was written)")
    bad = non_finite_path(data)
    if bad:
        raise ConfigError(f"{path}: {bad}: not a finite number (.nan/.inf); give a number or remove the key")
    return data


def read_stack_yaml(path: Path) -> dict[str, Any]:
    """``config:`` of a stack file, keys in full (``speech-endpoints:models``; the CLI's shorthand
    without a namespace is this project's), values as YAML parsed them."""
    text = stack_text(path)
    if text is None:
        raise ConfigError(f"{path}: no such stack file; create it with `python -m bench plan ... --stack <name>` "
                          "or check --stack / --stack-dir")
    data = parse_stack_text(path, text)
    return {(str(k) if ":" in str(k) else f"{PROJECT}:{k}"): v for k, v in (data.get("config") or {}).items()}


def project_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``speech-endpoints:*`` values of a full-key config mapping, keys without the prefix."""
    prefix = f"{PROJECT}:"
    return {k[len(prefix):]: v for k, v in config.items() if str(k).startswith(prefix)}


def stack_region(path: Path) -> str | None:
    """The stack's ``aws:region`` (what pulumi-aws deploys into), None when the file sets none.

    The offline commands use it when no ``--region`` is given, before the environment's default,
    the same order as the AWS provider (its config before ``AWS_REGION``)."""
    region = read_stack_yaml(path).get("aws:region")
    if region is None:
        return None
    if not isinstance(region, str) or not re.match(r"^[a-z]{2}(-[a-z]+)+-\d+$", region):
        raise ConfigError(f"{path}: aws:region {region!r} is not an AWS region name (e.g. us-east-1)")
    return region


def command_region(region: str | None, stack: str | None, stack_dir: Path, *, must_exist: bool = True) -> str | None:
    """The region an AWS-calling command uses: ``--region``, else the stack's ``aws:region``, else
    None (boto3 then takes the environment's). ``must_exist``: a named stack without a file is bad input."""
    if region:
        return region
    if not stack:
        return None
    path = stack_file(stack_dir, stack)
    if not path.exists() and not must_exist:
        return None
    return stack_region(path)


# --- artifacts by reference -----------------------------------------------------------------------


def file_sha256(data: bytes) -> str:
    """``sha256:<hex>`` of a file's bytes, as ``sha256sum`` computes it."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_reference(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """A ``{path, sha256}`` mapping (an embedded artifact has ``kind``, ``schema_version``, ...)."""
    return isinstance(value, Mapping) and "path" in value and "kind" not in value


def read_reference(value: Mapping[str, Any], base_dir: Path, key: str) -> tuple[ArtifactRef, Any]:
    """Validate a reference, read its file and check its sha256; (the reference, the parsed JSON)."""
    extra = sorted(set(value) - ARTIFACT_REF_KEYS)
    if extra:
        raise ConfigError(f"{key}: unknown key {extra[0]!r} in an artifact reference; it has path and sha256 only")
    try:
        ref = ArtifactRef.model_validate(dict(value))
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, key, label="")) from None
    file = Path(base_dir) / ref.path
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{key}: {ref.path}: no such file (relative to {Path(base_dir).resolve()}, the stack file's "
                          "directory); commit the artifact there or fix the path") from None
    except (IsADirectoryError, PermissionError) as err:
        raise ConfigError(f"{key}: {ref.path}: cannot read ({err.__class__.__name__}); point it at an artifact file") from None
    got = file_sha256(data)
    if got != ref.sha256:
        raise ConfigError(f"{key}: {ref.path} hashes to {got}, but config says {ref.sha256}: the file changed since "
                          "it was planned; re-plan with bench plan --stack (it records the new sha256) or restore "
                          "the file from version control")
    try:
        return ref, json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{key}: {ref.path}: not a JSON artifact ({err.__class__.__name__}); restore it from "
                          "version control") from None


def _check_artifact(kind: str, data: Any, where: str) -> None:
    # The file's own errors name the file and the field (the stack config key is in ``where``).
    from speech.files import parse_artifact
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact

    classes: dict[str, type[QmaxArtifact] | type[TtotalArtifact] | type[CopyArtifact]] = {
        "qmax": QmaxArtifact, "ttotal": TtotalArtifact, "tcopy": CopyArtifact}
    cls = classes[kind]
    try:
        parse_artifact(data, cls, where)
    except ArtifactError as err:
        raise ConfigError(str(err)) from None


def resolve_artifacts(raw: Mapping[str, Any], base_dir: Path, *, stack: str | None = None,
                      warn: Warn | None = None) -> dict[str, Any]:
    """``raw`` with every artifact reference replaced by its file's content (a copy; ``raw`` is kept).

    Relative paths are resolved against ``base_dir``, the stack file's directory. Embedded
    artifacts pass unchanged, with one warning for the stack naming :func:`migrate_command`."""
    out = copy.deepcopy(dict(raw))
    embedded: list[str] = []
    models = out.get("models")
    if not isinstance(models, dict):
        return out
    for name, entry in models.items():
        measurements = entry.get("measurements") if isinstance(entry, dict) else None
        if not isinstance(measurements, dict):
            continue
        for kind in ARTIFACT_KINDS:
            value = measurements.get(kind)
            key = f"{PROJECT}:models.{name}.measurements.{kind}"
            if is_reference(value):
                ref, data = read_reference(value, base_dir, key)
                _check_artifact(kind, data, f"{key} ({ref.path})")
                measurements[kind] = data
            elif isinstance(value, Mapping):
                embedded.append(f"{name}.{kind}")
    if embedded:
        (warn or _stderr_warn)(
            f"{PROJECT}:models: artifacts embedded in stack config ({', '.join(embedded)}) still load, but make "
            f"`pulumi config` and re-measurement diffs unreadable; run `{migrate_command(stack or '<stack>')}` to "
            "store them as files under artifacts/ referenced by path and sha256"
        )
    return out


# --- parsing --------------------------------------------------------------------------------------


def _key_of(loc: tuple[Any, ...]) -> str:
    # pydantic's location ("models", "kokoro-82m", "plan", "surge_ratio") is the config path.
    if loc and loc[0] in KNOWN_KEYS:
        head, rest = f"{PROJECT}:{loc[0]}", loc[1:]
    else:
        head, rest = f"{PROJECT}:models", loc
    return ".".join([head, *(str(p) for p in rest)])


def unknown_key_warnings(raw: Mapping[str, Any]) -> list[str]:
    """One warning per project key this project does not read: a team's own key (tolerated), or a
    typo of one of ours (then the close match is named)."""
    out = []
    for key in sorted(set(raw) - set(KNOWN_KEYS)):
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.7)
        hint = (f"if you meant {PROJECT}:{close[0]}, rename it" if close
                else f"this project reads {', '.join(f'{PROJECT}:{k}' for k in KNOWN_KEYS)}")
        out.append(f"{PROJECT}:{key}: not a key this project reads, ignored ({hint})")
    return out


def parse_stack_config(raw: Mapping[str, Any], *, base_dir: Path | None = None, stack: str | None = None,
                       warn: Warn | None = None) -> StackConfig:
    """Validate raw project config (keys without the ``speech-endpoints:`` prefix, values parsed).

    ``base_dir``: where artifact references are resolved (the stack file's directory; default the
    working directory, where Pulumi runs the program). ``warn`` receives each warning once
    (default: stderr). Pure but for reading the referenced files, so tests and the offline preview
    share the exact error texts with the program."""
    emit = warn or _stderr_warn
    for message in unknown_key_warnings(raw):
        emit(message)
    if raw.get("models") is None:
        raise ConfigError(
            f"{PROJECT}:models: missing; add a model with `python -m bench plan ... --stack <stack>` "
            "or write it into Pulumi.<stack>.yaml"
        )
    known = {k: v for k, v in raw.items() if k in KNOWN_KEYS}
    resolved = resolve_artifacts(known, Path(base_dir) if base_dir is not None else Path("."), stack=stack, warn=emit)
    try:
        return StackConfig.model_validate(resolved)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, key=_key_of)) from None


def load_stack_file(path: Path, stack: str | None = None, *, warn: Warn | None = None) -> StackConfig:
    """A ``Pulumi.<stack>.yaml`` as the program reads it: its project keys, references resolved
    against the file's directory."""
    path = Path(path)
    stack = stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return parse_stack_config(project_values(read_stack_yaml(path)), base_dir=path.parent, stack=stack, warn=warn)


