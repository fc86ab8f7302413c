"""Rebuild examples/Pulumi.multi.yaml: three routes of one Kokoro-82M image under one daily budget.

    python examples/build_multi.py [--daily-usd 800]

Each route gets its own artifacts (examples/artifacts/, referenced by path and sha256), built by
artifacts/reference/build.py under the route's name:
the reference figures (public numbers of someone else's ml.g5.xlarge endpoint, origin
``reference``), whose provenance source says they were applied to that route, not measured on it.
Replace them with each endpoint's own measurements (bench qmax, bench ttotal, bench plan --stack)
before production. The routes and what the team chose for them:

* ``assistant``: critical, interactive voice agent, peak 200 rps, floor 3 (the safe scale-in fleet);
* ``narration``: standard, article read-aloud, peak 400 rps;
* ``audiobooks``: batch on SageMaker asynchronous inference, peak 50 rps, 15 minutes acceptable delay.

Other keys of the file (comments at the top, aws:region, the budget) are kept.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IMAGE = ("123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro-82m"
         "@sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced")
"""The reference run's image by digest (the dev stack's; the account is a placeholder)."""

ROUTES = {
    "assistant": dict(priority="critical", plan=dict(peak_rps=200.0, trough_rps=10.0, min_instances=3)),
    "narration": dict(priority="standard", plan=dict(peak_rps=400.0, trough_rps=10.0)),
    "audiobooks": dict(priority="batch", hosting="async", plan=dict(peak_rps=50.0, trough_rps=1.0, max_delay_s=900.0)),
}


def main(argv: list[str] | None = None) -> int:
    from artifacts.reference.build import reference_qmax, reference_ttotal
    from speech.schema.config import Measurements, ModelConfig
    from speech.stack.write import PROJECT, read_stack_file, write_model_entry

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stack-file", type=Path, default=ROOT / "examples/Pulumi.multi.yaml")
    p.add_argument("--daily-usd", type=float, default=None, help="set speech-endpoints:budget.daily_usd too")
    args = p.parse_args(argv)
    for name, route in ROUTES.items():
        q, t = reference_qmax(name), reference_ttotal(name)
        entry = ModelConfig(instance_type="ml.g5.xlarge", image=IMAGE, plan=route["plan"],
                            priority=route["priority"], hosting=route.get("hosting", "realtime"),
                            measurements=Measurements(qmax=q, ttotal=t))
        # The artifacts go under examples/artifacts/ (next to the stack file), referenced by path and sha256.
        write_model_entry(args.stack_file, name, entry)
    if args.daily_usd is not None:
        import io

        from speech.files import atomic_write_text
        from speech.stack.write import round_trip_yaml

        data = read_stack_file(args.stack_file)
        data["config"][f"{PROJECT}:budget"] = {"daily_usd": args.daily_usd}
        buf = io.StringIO()
        round_trip_yaml().dump(data, buf)
        atomic_write_text(args.stack_file, buf.getvalue())
    print(f"wrote {args.stack_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
