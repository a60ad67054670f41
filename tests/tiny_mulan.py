"""Tiny random MuQ-MuLan in the released file layout (for tests; nothing here touches the network).

Layout written under `root`, the same as the hub repos:
  MuQ-MuLan-large/config.json + pytorch_model.bin   (whole MuQMuLan state dict, `mulan.` keys,
                                                     including the keys inference ignores)
  MuQ-large-msd-iter/config.json                    (MuQConfig with w2v2_config + mel stat)
  xlm-roberta-base/config.json + tokenizer.json
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from engine.style import MULAN_ID
from studio.testmodel import MULAN, MUQ, write_tiny_text_model


def write_tiny_mulan(root: Path, seed: int = 0) -> dict[str, Path]:
    from device_worker.style.load import build_mulan
    from device_worker.style.mulan import MuLanConfig
    from device_worker.style.muq import MuQConfig

    mulan_dir, muq_dir, text_dir = root / "MuQ-MuLan-large", root / "MuQ-large-msd-iter", root / "xlm-roberta-base"
    for d in (mulan_dir, muq_dir):
        d.mkdir(parents=True, exist_ok=True)
    (mulan_dir / "config.json").write_text(json.dumps(MULAN))
    (muq_dir / "config.json").write_text(json.dumps(MUQ))
    write_tiny_text_model(text_dir, max_positions=40)  # the studio test model's sizes
    torch.manual_seed(seed)
    model = build_mulan(MuLanConfig.from_json(MULAN), MuQConfig.from_json(MUQ), text_dir)
    # (the state dict includes the conformer's rotary `embed_positions.inv_freq`, as transformers saves it)
    sd = {"mulan." + k: v.clone() for k, v in model.state_dict().items()}
    for k, v in list(sd.items()):  # random batch-norm statistics, so eval mode is exercised
        if k.endswith("running_var"):
            sd[k] = torch.rand_like(v) + 0.5
        elif k.endswith("running_mean"):
            sd[k] = torch.randn_like(v) * 0.1
    # Keys the release carries that inference does not read (see device_worker/style/load.py).
    m = "mulan.audio.model.model."
    sd.update({
        "mulan.contrast.temperatures": torch.zeros(1, 1, 1),
        "mulan.audio.aggregator.weight": torch.zeros(1, 25, 1),
        "mulan.audio.aggregator.bias": torch.zeros(1),
        m + "quantizer_melspec_2048.random_projection": torch.zeros(512, 16),
        m + "quantizer_melspec_2048.codebook": torch.zeros(64, 16),
        m + "linear.weight": torch.zeros(64, 32),
        m + "linear.bias": torch.zeros(64),
        m + "cls_token": torch.zeros(32),
        m + "conformer.pos_conv_embed.conv.bias": torch.zeros(32),
        m + "conformer.pos_conv_embed.conv.weight_g": torch.zeros(1, 1, 8),
        m + "conformer.pos_conv_embed.conv.weight_v": torch.zeros(32, 8, 8),
        "mulan.text.model.embeddings.position_ids": torch.arange(40)[None],
    })
    torch.save(sd, mulan_dir / "pytorch_model.bin")
    return {"mulan": mulan_dir, "muq_config": muq_dir / "config.json", "text": text_dir}


class LocalStyleEncoder:
    """MuQ-MuLan in this process (tests). The studio uses the worker's `style` op instead."""

    def __init__(self, mulan_dir: str | Path, *, muq_config: str | Path, text_dir: str | Path,
                 model_id: str = MULAN_ID) -> None:
        from device_worker.style import load_style_model

        self.model = load_style_model(mulan_dir, muq_config=muq_config, text_dir=text_dir)
        self.model_id = model_id

    def embed_text(self, texts: list[str]) -> np.ndarray:
        return self.model.embed_text(list(texts)).numpy()

    def embed_audio(self, wavs: np.ndarray) -> np.ndarray:
        import torch

        return self.model.embed_audio(torch.from_numpy(np.asarray(wavs, dtype=np.float32))).numpy()


def local_encoder_from_models(models_dir: str | Path | None = None) -> LocalStyleEncoder:
    """In-process MuQ-MuLan from the `mulan` model files (ModelFileMissing names the fetch command)."""
    from engine.modelfiles import resolve

    paths = resolve("mulan", models_dir=models_dir)
    return LocalStyleEncoder(paths["pytorch_model.bin"].parent, muq_config=paths["muq/config.json"],
                             text_dir=paths["text/tokenizer.json"].parent)
