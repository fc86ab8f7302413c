"""A Kokoro-82M checkpoint in upstream's exact layout and formats, with random weights: what the torch
path of `speech rehearse` serves where the real checkpoint cannot be downloaded."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from speech.errors import RehearsalError

# --- a checkpoint in upstream's layout (torch sources) ------------------------------------------------

UPSTREAM_HYPERPARAMETERS: dict[str, Any] = {
    "istftnet": {"upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6], "gen_istft_hop_size": 5,
                 "gen_istft_n_fft": 20, "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
                 "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 512},
    "dim_in": 64, "dropout": 0.2, "hidden_dim": 512, "max_conv_dim": 512, "max_dur": 50, "multispeaker": True,
    "n_layer": 3, "n_mels": 80, "n_token": 178, "style_dim": 128, "text_encoder_kernel_size": 5,
    "plbert": {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 2048,
               "max_position_embeddings": 512, "num_hidden_layers": 12, "dropout": 0.1},
}
"""Kokoro-82M v1.0's config.json without its vocabulary: what kokoro.KModel.__init__ reads (n_token and
plbert for the ALBERT, hidden_dim, style_dim, n_layer, max_dur, dropout for the prosody predictor,
text_encoder_kernel_size, n_mels and istftnet for the decoder). A test holds it equal to the config
kokoro-onnx ships (upstream's file)."""
KMODEL_PARTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
"""The sub-modules upstream's kokoro-v1_0.pth holds, one state dict each (keys prefixed ``module.``, as
saved from DataParallel); KModel loads them in this order."""
VOICE_SHAPE = (510, 1, 256)
"""One reference style per phoneme count (1..510) x a batch of 1 x 256 (128 decoder + 128 prosody)."""
FRAMES_PER_TOKEN = 2
"""Random weights have random durations; the duration head is set so each phoneme lasts 2 frames (50 ms),
so the audio has a sentence's length and the decoder a sentence's work."""


def upstream_vocab() -> dict[str, int]:
    """Upstream's phoneme vocabulary, from the config.json the kokoro-onnx wheel carries."""
    import importlib.util

    spec = importlib.util.find_spec("kokoro_onnx")
    if spec is None or not spec.submodule_search_locations:
        raise RehearsalError("a torch rehearsal needs upstream's vocabulary from kokoro-onnx: "
                             "pip install --no-deps kokoro-onnx==0.6.1 (container/requirements-nodeps.txt)")
    config = Path(list(spec.submodule_search_locations)[0]) / "config.json"
    return json.loads(config.read_text(encoding="utf-8"))["vocab"]


def _kmodel_class():
    """kokoro.KModel without kokoro/__init__.py (which imports KPipeline, misaki.en and spaCy)."""
    import importlib
    import importlib.util

    if "kokoro" not in sys.modules:
        spec = importlib.util.find_spec("kokoro")
        if spec is None or not spec.submodule_search_locations:
            raise RehearsalError("a torch rehearsal needs torch and kokoro: pip install -r container/requirements-torch.txt")
        sys.modules["kokoro"] = importlib.util.module_from_spec(spec)
    return importlib.import_module("kokoro.model").KModel


def write_upstream_checkpoint(dest: Path, voices: tuple[str, ...], seed: int = 0) -> Path:
    """``dest`` in upstream's layout and formats with random weights: config.json (the hyperparameters
    above + upstream's vocabulary), kokoro-v1_0.pth (``{part: {"module." + key: tensor}}``, torch.save),
    voices/<name>.pt (float32 tensors of :data:`VOICE_SHAPE`)."""
    import math

    import torch

    KModel = _kmodel_class()
    config = {**UPSTREAM_HYPERPARAMETERS, "vocab": upstream_vocab()}
    dest.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.pth"
        torch.save({}, empty)  # KModel keeps its random initialisation and never reaches the hub
        model = KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=str(empty))
    head = model.predictor.duration_proj.linear_layer
    p = FRAMES_PER_TOKEN / config["max_dur"]  # a duration is the sum of max_dur sigmoids, each p
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(math.log(p / (1 - p)))
    (dest / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    torch.save({part: {f"module.{k}": v for k, v in getattr(model, part).state_dict().items()} for part in KMODEL_PARTS},
               dest / "kokoro-v1_0.pth")
    (dest / "voices").mkdir(exist_ok=True)
    for name in voices:
        torch.save(torch.randn(*VOICE_SHAPE) * 0.1, dest / "voices" / f"{name}.pt")
    return dest


