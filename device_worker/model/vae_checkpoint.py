"""Reading Oobleck VAE weights: TorchScript / safetensors / state-dict files -> one canonical state dict.

Canonical names are stable-audio-tools' (`decoder.layers.N...`, as in the reference `vae_model.pt`).
Accepted on the way in:
- weight norm kept (`weight_g`/`weight_v`, or `parametrizations.weight.original0/1`): folded to `weight`;
- diffusers `AutoencoderOobleck` names (`decoder.conv1`, `decoder.block.N.conv_t1`, `res_unitK.snake1`, ...);
- a common prefix in front of `encoder.`/`decoder.` (`model.`, `autoencoder.`, `pretransform.model.`);
- Snake `alpha`/`beta` stored as `[C]` (stable-audio-tools) or `[1, C, 1]` (diffusers).
Anything that does not fit one of these is an error naming the keys; nothing is skipped silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from device_worker.model.checkpoints import CheckpointError, check_keys, show_keys


@dataclass(frozen=True)
class OobleckConfig:
    """Hyper-parameters of an Oobleck autoencoder, read off the state dict's shapes."""

    channels: int = 128  # base width; block i works at channels * c_mults[i]
    c_mults: tuple[int, ...] = (1, 2, 4, 8, 16)
    strides: tuple[int, ...] = (2, 4, 4, 8, 8)  # product = samples per latent frame (2048)
    io_channels: int = 2  # stereo
    encoder_latent_dim: int = 128  # mean (64) || scale (64), before the VAE bottleneck
    decoder_latent_dim: int = 64

    @property
    def hop(self) -> int:
        hop = 1
        for s in self.strides:
            hop *= s
        return hop



# --- reading files -------------------------------------------------------------------------------


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors of a VAE file: `.safetensors`, a TorchScript archive (the release), or a torch.save'd dict."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"VAE checkpoint {str(path)!r} does not exist (expected the release's vae_model.pt)"
        )
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return dict(load_file(str(path), device="cpu"))
    try:
        # The release is a traced TorchScript module. torch.jit.load rebuilds its TorchScript code and
        # tensors but does not unpickle arbitrary Python objects, and we only read state_dict(): no model
        # code from the file ever runs.
        return dict(torch.jit.load(str(path), map_location="cpu").state_dict())
    except RuntimeError as jit_error:
        try:
            # A plain torch.save'd state dict (e.g. a stable-audio-tools training checkpoint).
            obj = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as load_error:
            raise CheckpointError(
                f"cannot read {str(path)!r} as TorchScript ({jit_error}) nor as a weights-only torch file "
                f"({load_error}); pass the release's vae_model.pt or a .safetensors state dict"
            ) from load_error
    if isinstance(obj, Mapping) and "state_dict" in obj and isinstance(obj["state_dict"], Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointError(f"{str(path)!r} holds no state dict of tensors")
    return dict(obj)


# --- normalising names -----------------------------------------------------------------------------


def _strip_prefix(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop whatever stands in front of `encoder.`/`decoder.`; it must be the same for every key."""
    out, prefixes, stray = {}, set(), []
    for key, value in sd.items():
        m = re.match(r"^((?:[^.]+\.)*?)((?:en|de)coder\..*)$", key)  # first component named en/decoder
        if m is None:
            stray.append(key)
            continue
        prefixes.add(m.group(1))
        out[m.group(2)] = value
    if stray:
        raise CheckpointError(
            f"keys outside encoder./decoder. that do not map to the Oobleck VAE: {show_keys(stray)}"
        )
    if len(prefixes) > 1:
        raise CheckpointError(f"keys carry different prefixes {sorted(prefixes)!r}; expected one model")
    return out


def fold_weight_norm(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each weight-norm pair by `W = g * v / ||v||` (norm over every dim except 0, as torch's
    `weight_norm(dim=0)`; for ConvTranspose1d dim 0 is the input channels, for Conv1d the output)."""
    pairs = {
        r"^(.*)\.weight_g$": "g",
        r"^(.*)\.weight_v$": "v",
        r"^(.*)\.parametrizations\.weight\.original0$": "g",
        r"^(.*)\.parametrizations\.weight\.original1$": "v",
    }
    out: dict[str, torch.Tensor] = {}
    parts: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in sd.items():
        for pattern, role in pairs.items():
            m = re.match(pattern, key)
            if m:
                parts.setdefault(m.group(1), {})[role] = value
                break
        else:
            out[key] = value
    for stem, gv in parts.items():
        if set(gv) != {"g", "v"}:
            raise CheckpointError(f"weight norm of {stem!r} has only {sorted(gv)} (need both g and v)")
        g, v = gv["g"].float(), gv["v"].float()
        if g.numel() != v.shape[0] or g.shape[0] != v.shape[0]:
            raise CheckpointError(
                f"weight norm of {stem!r}: g {tuple(g.shape)} does not fit v {tuple(v.shape)}"
            )
        if f"{stem}.weight" in out:
            raise CheckpointError(f"{stem!r} has both a plain weight and a weight-norm pair")
        norm = torch.linalg.vector_norm(v, dim=tuple(range(1, v.ndim)), keepdim=True)  # [C0, 1, 1]
        out[f"{stem}.weight"] = v * (g.reshape(norm.shape) / norm)
    return out


# diffusers AutoencoderOobleck -> stable-audio-tools positions. `{n}` is the number of blocks.
_RESIDUAL = {"snake1": "0", "conv1": "1", "snake2": "2", "conv2": "3"}
_ENC_BLOCK = {"res_unit1": "0", "res_unit2": "1", "res_unit3": "2", "snake1": "3", "conv1": "4"}
_DEC_BLOCK = {"snake1": "0", "conv_t1": "1", "res_unit1": "2", "res_unit2": "3", "res_unit3": "4"}


def _from_diffusers(key: str, n_blocks: int) -> str:
    side, rest = key.split(".", 1)
    m = re.match(r"^block\.(\d+)\.(\w+)\.(.*)$", rest)
    if m:
        block, part, tail = int(m.group(1)), m.group(2), m.group(3)
        table = _ENC_BLOCK if side == "encoder" else _DEC_BLOCK
        if part not in table:
            return key
        if part.startswith("res_unit"):
            m2 = re.match(r"^(\w+)\.(.*)$", tail)
            if m2 is None or m2.group(1) not in _RESIDUAL:
                return key
            tail = f"layers.{_RESIDUAL[m2.group(1)]}.{m2.group(2)}"
        return f"{side}.layers.{block + 1}.layers.{table[part]}.{tail}"
    outer = {"conv1": 0, "snake1": n_blocks + 1, "conv2": n_blocks + 2}
    m = re.match(r"^(conv1|snake1|conv2)\.(.*)$", rest)
    if m:
        return f"{side}.layers.{outer[m.group(1)]}.{m.group(2)}"
    return key


def canonical_state_dict(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Any accepted layout -> stable-audio-tools names, folded weights, `[C]` snake params, float32."""
    sd = fold_weight_norm(_strip_prefix(sd))
    if any(".block." in k for k in sd):
        n_blocks = len(
            {re.match(r"^decoder\.block\.(\d+)\.", k).group(1) for k in sd if k.startswith("decoder.block.")}
        )
        sd = {_from_diffusers(k, n_blocks): v for k, v in sd.items()}
    out = {}
    for key, value in sd.items():
        if key.endswith((".alpha", ".beta")) and value.ndim == 3 and value.shape[0] == value.shape[2] == 1:
            value = value.reshape(-1)  # diffusers keeps [1, C, 1]
        out[key] = value.float()
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> OobleckConfig:
    """Read channels, c_mults, strides and latent sizes off a canonical state dict's decoder shapes
    (every encoder and decoder shape is then checked against the model these imply)."""

    def need(key: str) -> torch.Tensor:
        if key not in sd:
            raise CheckpointError(f"cannot infer the VAE layout: {key!r} is missing (keys: {show_keys(sd)})")
        return sd[key]

    blocks = sorted(
        {int(m.group(1)) for k in sd if (m := re.match(r"^decoder\.layers\.(\d+)\.layers\.1\.weight$", k))}
    )
    if not blocks or blocks != list(range(1, len(blocks) + 1)):
        raise CheckpointError(
            f"no run of decoder up-sampling blocks decoder.layers.1..N found (got {blocks})"
        )
    n = len(blocks)
    first = need("decoder.layers.0.weight")  # [C*c_mults[-1], latent, 7]
    last = need(f"decoder.layers.{n + 2}.weight")  # [io, C, 7]
    channels = last.shape[1]
    c_mults, strides = [0] * n, [0] * n
    for j in blocks:  # decoder block j undoes encoder block n - j
        w = sd[f"decoder.layers.{j}.layers.1.weight"]  # ConvTranspose1d [in, out, 2 * stride]
        if w.shape[0] % channels or w.shape[2] % 2:
            raise CheckpointError(f"decoder.layers.{j}.layers.1.weight has an odd shape {tuple(w.shape)}")
        c_mults[n - j] = w.shape[0] // channels
        strides[n - j] = w.shape[2] // 2
    enc_out = need(f"encoder.layers.{n + 2}.weight")  # [encoder latent, C*c_mults[-1], 3]
    return OobleckConfig(
        channels=channels,
        c_mults=tuple(c_mults),
        strides=tuple(strides),
        io_channels=last.shape[0],
        encoder_latent_dim=enc_out.shape[0],
        decoder_latent_dim=first.shape[1],
    )


def check_against(model_sd: Mapping[str, torch.Tensor], sd: Mapping[str, torch.Tensor]) -> None:
    """Every key present on both sides with the same shape, or a CheckpointError listing what is off."""
    check_keys({k: v.shape for k, v in model_sd.items()}, {k: v.shape for k, v in sd.items()},
               "VAE checkpoint (Oobleck layout)")
