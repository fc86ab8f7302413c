"""One in-process copy of kokoro.KModel: what the torch backend (in-process layout) and each of
its worker processes (backends/torch_workers.py) both run. Neither imports the other: both
import this module, so the worker child never loads the backend class it serves.

Upstream layout of MODEL_DIR: config.json, one *.pth (kokoro-v1_0.pth), voices/*.pt.
torch and kokoro are imported by the caller (init_framework / the worker), never at import time."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelLoadError

# The submodules KModel loads from the .pth, each a state dict (upstream: keys prefixed "module.").
PARTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
STYLE_DIM = 256
WEIGHTS_NAME = "kokoro-v1_0.pth"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def import_kmodel():
    """kokoro.KModel without running kokoro/__init__.py, which imports KPipeline and through it
    misaki.en -> spaCy, num2words and their dependencies: seconds of start-up, memory and a
    dependency chain the server never uses (its G2P is the offline espeak path). The package
    object is built from kokoro's own spec, so kokoro.model and its siblings import as usual."""
    if "kokoro" not in sys.modules:
        spec = importlib.util.find_spec("kokoro")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("No module named 'kokoro'")
        pkg = importlib.util.module_from_spec(spec)  # the module object, __init__ not executed
        sys.modules["kokoro"] = pkg
        try:
            from loguru import logger
            # What kokoro/__init__.py does first: KModel.forward logs every call at DEBUG.
            logger.disable("kokoro")
            model = importlib.import_module("kokoro.model")
        except BaseException:
            del sys.modules["kokoro"]
            raise
        pkg.KModel = model.KModel
    return importlib.import_module("kokoro.model").KModel


def missing_files(model_dir: Path | None) -> str | None:
    """What MODEL_DIR lacks for BACKEND=torch, as one sentence with the fix; None when complete.
    Looks at names only (no file is opened), so the server can refuse to start at once."""
    if model_dir is None:
        return ("BACKEND=torch needs MODEL_DIR in the upstream Kokoro-82M layout (config.json, "
                f"{WEIGHTS_NAME}, voices/*.pt); set MODEL_DIR (SageMaker mounts /opt/ml/model)")
    d = Path(model_dir)
    if not d.is_dir():
        return f"MODEL_DIR {d} does not exist or is not a directory; point MODEL_DIR at the model files"
    lacks = []
    if not (d / "config.json").is_file():
        lacks.append("config.json (hyperparameters and vocabulary)")
    if not sorted(d.glob("*.pth")):
        lacks.append(f"*.pth ({WEIGHTS_NAME}, the weights)")
    if not sorted((d / "voices").glob("*.pt")):
        lacks.append("voices/*.pt (at least one voice)")
    if lacks:
        return (f"MODEL_DIR {d} lacks {', '.join(lacks)}; BACKEND=torch needs the upstream "
                f"Kokoro-82M layout: config.json, {WEIGHTS_NAME} and voices/*.pt")
    return None


def resolve_model_files(model_dir: Path | None) -> tuple[Path, Path, list[Path]]:
    """(config.json, the .pth, voices/*.pt) or ModelLoadError naming what is missing and where."""
    problem = missing_files(model_dir)
    if problem:
        raise ModelLoadError(problem)
    assert model_dir is not None  # missing_files reports a MODEL_DIR that is not set
    d = Path(model_dir)
    weights = sorted(d.glob("*.pth"))
    if len(weights) > 1:
        # Picking one silently could serve weights other than the ones the deployment meant.
        raise ModelLoadError(f"MODEL_DIR {d} holds several *.pth ({', '.join(p.name for p in weights)}); keep one")
    return d / "config.json", weights[0], sorted((d / "voices").glob("*.pt"))


class LocalModel:
    """KModel, its voices and the checks that make a wrong checkpoint a load error; runs one
    segment per call on the device it was loaded to."""

    def __init__(self, torch, KModel, device: str):
        self.torch, self.KModel, self.device = torch, KModel, device
        self.model: Any = None  # a kokoro.KModel once loaded (kokoro publishes no types)
        self.style: dict[str, Any] = {}

    def load(self, config: Path, weights: Path, voices: list[Path]) -> None:
        try:
            # repo_id given so KModel does not warn; config and model paths keep it off the hub.
            self.model = self.KModel(repo_id="hexgrad/Kokoro-82M", config=str(config),
                                     model=str(weights)).to(self.device).eval()
        except Exception as e:  # missing hyperparameter, bad JSON, corrupt or foreign .pth: all 503
            raise ModelLoadError(f"cannot load KModel from {config} and {weights.name}: "
                                 f"{type(e).__name__}: {e}") from e
        self.check_state_dict(weights)
        self.fold_weight_norm()
        self.style = {p.stem: self.load_voice(p) for p in voices}
        self._n_voices = len(self.style)

    @property
    def vocab(self) -> dict:
        return self.model.vocab

    def check_state_dict(self, weights: Path) -> None:
        """KModel falls back to load_state_dict(strict=False) when keys do not match, so a .pth
        of another architecture would load as random weights and serve noise without a word."""
        torch = self.torch
        try:
            # mmap: only the key names are needed here, not a second copy of the tensors.
            sd = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
        except Exception as e:  # torch raises pickle/zip/runtime errors for corrupt files
            raise ModelLoadError(f"cannot read {weights}: {type(e).__name__}: {e}") from e
        if not isinstance(sd, dict) or set(sd) != set(PARTS):
            got = sorted(sd) if isinstance(sd, dict) else type(sd).__name__
            raise ModelLoadError(f"{weights} is not a Kokoro checkpoint: top-level keys {got}, want {list(PARTS)}")
        for part in PARTS:
            have = {k.removeprefix("module.") for k in sd[part]}
            want = set(getattr(self.model, part).state_dict())
            if have != want:
                miss, extra = sorted(want - have), sorted(have - want)
                raise ModelLoadError(
                    f"{weights} does not match config.json in {part}: {len(miss)} missing keys "
                    f"{miss[:3]}, {len(extra)} unexpected {extra[:3]}")

    def fold_weight_norm(self) -> int:
        """KModel's decoder keeps 89 convolutions under weight_norm, which recomputes each weight
        from (g, v) on every call: 89 extra ops per segment for weights that never change while
        serving. Folding them once is exact (same float ops, done once; audio identical) and cuts
        host-side launches, the GPU's bottleneck for this model."""
        from torch.nn.utils import remove_weight_norm
        n = 0
        for module in self.model.modules():
            for hook in list(module._forward_pre_hooks.values()):
                if type(hook).__name__ == "WeightNorm":
                    remove_weight_norm(module, hook.name)
                    n += 1
        return n

    def load_voice(self, path: Path):
        try:
            t = self.torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:
            raise ModelLoadError(f"cannot read voice {path}: {type(e).__name__}: {e}") from e
        if not hasattr(t, "shape") or t.shape[-1] != STYLE_DIM or t.numel() % STYLE_DIM:
            raise ModelLoadError(f"voice {path} has shape {tuple(getattr(t, 'shape', ()))}, "
                                 f"want (rows, 1, {STYLE_DIM})")
        # Upstream packs are (510, 1, 256); one row is then the (1, 256) reference KModel takes.
        return t.float().reshape(-1, 1, STYLE_DIM).to(self.device)

    def blend(self, voice: str):
        """A blend's table from its canonical id (voices.py; validated by the server): the
        signed weighted sum of the voices' tables, kept for the next call (bounded)."""
        from ..voices import parse_voice_spec
        parts = parse_voice_spec(voice).parts
        table = sum(w * self.style[name] for name, w in parts)
        if len(self.style) < self._n_voices + 256:
            self.style[voice] = table
        return table

    def run(self, phonemes: str, voice: str, speed: float) -> tuple[np.ndarray, np.ndarray | None]:
        """(float32 audio, predicted frames per input token with both pads) for one segment (the
        caller holds inference_mode and its stream)."""
        if not phonemes:
            return np.zeros(0, np.float32), None
        table = self.style.get(voice)
        if table is None:
            table = self.blend(voice)
        ref = table[min(len(phonemes), len(table)) - 1]
        # KModel.forward returns audio and durations already on the host (.cpu() waits for the
        # current stream only), so the numpy views below copy nothing more.
        out = self.model(phonemes, ref, speed, return_output=True)
        dur = None if out.pred_dur is None else out.pred_dur.numpy().reshape(-1)
        return out.audio.float().numpy().ravel(), dur
