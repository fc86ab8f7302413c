"""``python -m policy check``: the pack against the program, offline.

Runs the program under Pulumi's mocks (as speech-deploy preview does), starts the real pack
process and sends it every registered resource over the analyzer protocol, exactly as
`pulumi preview --policy-pack policy` would. Exit 0: no mandatory violation; 1: at least one;
2: bad input (stack file, policy config), also a ConfigError the program raises; 130: interrupted.
With --json the report, and any failure as {"error": {"type", "message", "exit_code"}}, is JSON
on stdout.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the harness (grpc, the pack's rules) loads when a check runs, not for --help
    from policy.harness import Diagnostic, Report, Resource

LEVEL_ORDER = ("mandatory", "advisory")


def preview_resources(stack_file: Path, stack: str, *, first_preview: bool = False,
                      receipts: dict[str, str] | None = None) -> tuple[list[Resource], Any]:
    """The program's resources as the engine sends them to the pack: inputs, parent, dependencies.

    ``first_preview``: as in the first preview of a new stack, where provider-computed values
    (ids, ARNs, URLs, digests of images not yet built) are unknown. ``receipts``: what the S3 data
    sources find (:func:`speech.infra.preview.load_receipts`); none by default."""
    from policy.harness import Resource
    from speech.infra.preview import run_preview

    result = run_preview(stack_file, stack, first_preview=first_preview, receipts=receipts)
    resources = [
        Resource(type=r.type, name=r.name, props=r.inputs, parent=r.parent, urn=r.urn,
                 dependencies=list(r.dependencies), property_dependencies=dict(r.property_dependencies))
        for r in result.resources
        if r.custom
    ]
    return resources, result


def load_config(path: Path | None) -> dict[str, Any] | None:
    """A ``--policy-pack-config`` style file: {"policy": "advisory" | {"enforcementLevel": ..., prop: ...}}."""
    from policy.harness import PolicyConfigError

    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyConfigError(f"{path}: no such policy config file") from None
    except ValueError as err:
        raise PolicyConfigError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise PolicyConfigError(f"{path}: top level must be an object keyed by policy name")
    return data


RECEIPTS_POLICY = "measured-artifacts-match-receipts"
NO_RECEIPTS_OFFLINE = ("note: this offline check read no receipts (no --receipts): pass a copy of the provenance "
                       "bucket's receipts/ (--receipts DIR) or --receipts s3://BUCKET to read them")


def render(report: Report, stack: str, first_preview: bool = False, receipts_given: bool = True) -> str:
    lines = [f"policy pack check of stack {stack!r}{' (first preview)' if first_preview else ''}: "
             f"{len(report.mandatory)} mandatory, {len(report.advisory)} advisory violation(s)"]
    for level in LEVEL_ORDER:
        diags = report.by_level(level)
        if not diags:
            continue
        lines += ["", f"{level.upper()} ({len(diags)}):"]
        for d in sorted(diags, key=lambda d: (d.policy, d.resource or "")):
            lines.append(f"  [{d.policy}] {d.resource or '(stack)'}: {d.message}")
    lines.append("")
    if not receipts_given and report.of(RECEIPTS_POLICY):
        lines += [NO_RECEIPTS_OFFLINE, ""]
    lines.append("BLOCKED: mandatory violations" if report.mandatory else "OK: no mandatory violation")
    return "\n".join(lines)


def as_json(report: Report, stack: str) -> str:
    def d(x: Diagnostic) -> dict[str, Any]:
        return {"policy": x.policy, "level": x.level, "resource": x.resource, "urn": x.urn, "message": x.message}

    return json.dumps({"stack": stack, "blocked": bool(report.mandatory),
                       "violations": [d(x) for x in report.diagnostics]}, indent=2)


def run_check(resources: Iterable[Resource], config: dict[str, Any] | None, stack: str) -> Report:
    from policy.harness import PackClient

    with PackClient(stack=stack) as pack:
        return pack.check(resources, config)


def main(argv: list[str] | None = None) -> int:
    from speech.cli import (
        JsonAwareParser,
        add_verbosity,
        configure_logging,
        guarded,
        parse_or_exit_code,
        report_error,
        stack_name,
        verbosity,
        wants_json,
    )

    JsonAwareParser.json_errors = json_out = wants_json(argv)
    p = JsonAwareParser(prog="speech-policy check", description=__doc__.split("\n\n")[1],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", required=True, type=stack_name, metavar="NAME",
                   help="stack name, reads Pulumi.NAME.yaml (NAME, ORG/NAME or ORG/PROJECT/NAME)")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                   help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    p.add_argument("--config", type=Path, metavar="FILE", help="policy config JSON (same format as --policy-pack-config)")
    p.add_argument("--json", action="store_true", help="print violations as JSON (errors too)")
    p.add_argument("--first-preview", action="store_true",
                   help="run the program as the engine runs the first preview of a new stack (ids, ARNs, URLs and "
                        "image digests unknown; dependencies sent): what a fresh account's `pulumi preview` sees")
    p.add_argument("--receipts", metavar="DIR|s3://BUCKET",
                   help="where the program's S3 data sources find measurement receipts offline: a copy of the "
                        "provenance bucket's receipts/ (aws s3 sync s3://BUCKET/receipts/ DIR/receipts/), or "
                        "s3://BUCKET to read it with your AWS credentials; default none, so measured SageMaker "
                        "figures have no receipt and block")
    add_verbosity(p)
    args, code = parse_or_exit_code(p, argv)
    if args is None:
        return code
    configure_logging(verbosity(args))

    def check() -> int:
        from policy.harness import PolicyConfigError
        from speech.infra.preview import load_receipts
        from speech.stack.read import stack_file, stack_name

        try:
            config = load_config(args.config)
        except PolicyConfigError as err:
            return report_error("PolicyConfigError", str(err), 2, as_json=json_out)
        receipts = load_receipts(args.receipts) if args.receipts else None
        stack = stack_name(args.stack)
        resources, _ = preview_resources(stack_file(args.stack_dir, args.stack), stack,
                                         first_preview=args.first_preview, receipts=receipts)
        try:
            report = run_check(resources, config, stack)
        except PolicyConfigError as err:
            return report_error("PolicyConfigError", str(err), 2, as_json=json_out)
        print(as_json(report, args.stack) if args.json
              else render(report, args.stack, args.first_preview, receipts_given=bool(args.receipts)))
        return 1 if report.mandatory else 0

    return guarded(check, as_json=json_out)
