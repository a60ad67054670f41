"""Loading DiffRhythm DiT checkpoints strictly (`load_dit`; the VAE's loader is `vae.load_vae`).

Release format: `torch.save({"model_state_dict": OrderedDict})`, fp16 tensors, every key prefixed
`transformer.` (upstream's CFM wrapper). Upstream loads with `strict=False` and silently keeps random
weights for anything that does not match; here every missing key, unexpected key and wrong shape is a
`CheckpointError` that names them.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from device_worker.model.checkpoints import CheckpointError, check_keys, empty_modules
from device_worker.model.config import HALF_MODES, PRESETS, DiTConfig
from device_worker.model.dit import DiT


def config_from_upstream(cfg: dict[str, Any], state: dict[str, torch.Tensor] | None) -> DiTConfig:
    """Upstream JSON `{"model_type", "model": {...}, "max_frames"?}` (+ optional "version"/"causal")."""
    model = dict(cfg.get("model", cfg))
    known = {f for f in DiTConfig.__dataclass_fields__}
    kwargs = {k: v for k, v in model.items() if k in known}  # `heads` is not passed on, as upstream (config.py)
    for key in ("max_frames", "causal", "duration_embed", "text_max_pos"):
        if key in cfg and key not in kwargs:
            kwargs[key] = cfg[key]
    if str(cfg.get("version", "1.2")).startswith("1.0"):
        kwargs.setdefault("causal", True)
        kwargs.setdefault("duration_embed", False)
        kwargs.setdefault("text_max_pos", 4096)
    has_duration = state is not None and any(k.startswith("duration_time_embed.") for k in state)
    if "max_frames" not in kwargs:  # upstream takes it from the CLI; the duration embedding tells
        kwargs["max_frames"] = 6144 if has_duration else 2048
    return DiTConfig(**kwargs)


def _config_from_state(state: dict[str, torch.Tensor]) -> DiTConfig:
    """Architecture read off the tensor shapes (assumes v1.2 semantics: bidirectional attention)."""
    try:
        dim = state["proj_out.weight"].shape[1]
        kwargs = dict(
            dim=dim,
            depth=len({k.split(".")[1] for k in state if k.startswith("transformer_blocks.")}),
            ff_mult=state["transformer_blocks.0.mlp.gate_proj.weight"].shape[0] // dim,
            text_dim=state["text_embed.text_embed.weight"].shape[1],
            conv_layers=len({k.split(".")[2] for k in state if k.startswith("text_embed.text_blocks.")}),
            mel_dim=state["proj_out.weight"].shape[0],
            text_num_embeds=state["text_embed.text_embed.weight"].shape[0] - 1,
        )
    except KeyError as e:
        raise CheckpointError(f"cannot infer the architecture: key {e} missing; pass config=") from None
    has_duration = any(k.startswith("duration_time_embed.") for k in state)
    return DiTConfig(**kwargs, max_frames=6144 if has_duration else 2048)


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Tensors of a release `.pt` (weights_only) or `.safetensors` file, `transformer.` prefix removed."""
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        raw: Any = load_file(str(path))
    else:
        try:  # pickles never run code here: weights_only is not optional
            raw = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # legacy (non-zip) files cannot be memory-mapped
            raw = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(raw, dict) and "model_state_dict" in raw:
        raw = raw["model_state_dict"]
    elif isinstance(raw, dict) and "ema_model_state_dict" in raw:  # trainer checkpoint (ema-pytorch)
        raw = {k.removeprefix("ema_model."): v for k, v in raw["ema_model_state_dict"].items()
               if k not in ("initted", "step")}
    if not isinstance(raw, dict) or not all(isinstance(v, torch.Tensor) for v in raw.values()):
        raise CheckpointError(f"{path}: expected a state dict of tensors (or {{'model_state_dict': ...}})")
    if any(k.startswith("transformer.") for k in raw):
        return {k.removeprefix("transformer."): v for k, v in raw.items()}
    return dict(raw)


def check_state_dict(model: torch.nn.Module, state: dict[str, torch.Tensor], source: str = "checkpoint") -> None:
    """Raise CheckpointError naming every missing, unexpected and mis-shaped key."""
    check_keys({k: v.shape for k, v in model.state_dict().items()}, {k: v.shape for k, v in state.items()}, source)


def _resolve(checkpoint: str | os.PathLike) -> tuple[Path, Path | None]:
    path = Path(checkpoint)
    if not path.is_dir():
        return path, None
    for name in ("cfm_model.pt", "cfm_model.safetensors", "model.safetensors"):
        if (path / name).is_file():
            config = path / "config.json"
            return path / name, config if config.is_file() else None
    raise CheckpointError(f"{path}: no cfm_model.pt or cfm_model.safetensors in this folder")


def load_dit(
    checkpoint: str | os.PathLike,
    config: str | os.PathLike | dict[str, Any] | DiTConfig | None = None,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    exact_buffers: bool = False,
    half_mode: str = "mixed",
) -> DiT:
    """Build the DiT for `checkpoint` and load it strictly.

    checkpoint: a `cfm_model.pt` / `.safetensors` file or a folder holding one (and maybe `config.json`).
    config: a preset name (`config.PRESETS`), upstream's JSON (dict or path), a DiTConfig, or None (folder's
        config.json, else inferred from the tensor shapes; max_frames 6144 iff a duration embedding exists).
        Nothing in a v1.0 checkpoint tells it apart from v1.2: pass `diffrhythm-1.0-base/full` (causal
        attention) or `"version": "1.0"` in the JSON for those.
    exact_buffers: exact fp32 RoPE / lyric position tables instead of upstream's fp16-rounded ones.
    half_mode: for float16/bfloat16 only. "mixed" keeps the residual stream, RoPE rotation and sampler
        arithmetic in float32 (recommended on GPUs); "upstream" runs everything in `dtype` like
        upstream's `model.half()`. Norms are computed in float32 in both.
    """
    if half_mode not in HALF_MODES:
        raise ValueError(f"half_mode must be one of {HALF_MODES}, not {half_mode!r}")
    path, folder_config = _resolve(checkpoint)
    state = read_state_dict(path)
    if config is None and folder_config is not None:
        config = folder_config
    if isinstance(config, DiTConfig):
        cfg = config
    elif isinstance(config, str) and config in PRESETS:
        cfg = DiTConfig.from_name(config)
    elif isinstance(config, (str, os.PathLike)):
        cfg = config_from_upstream(json.loads(Path(config).read_text()), state)
    elif isinstance(config, dict):
        cfg = config_from_upstream(config, state)
    else:
        cfg = _config_from_state(state)
    upcast = half_mode == "mixed" and dtype in (torch.float16, torch.bfloat16)
    with empty_modules():  # every tensor comes from the checkpoint
        model = DiT(cfg, exact_buffers=exact_buffers, upcast_residual=upcast)
    check_state_dict(model, state, source=f"{path} (config {asdict(cfg)})")
    model.load_state_dict(state, strict=True, assign=True)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
