"""Load MuQ-MuLan from the released files, strictly, into the plain-torch port.

Files (see docs/models.md): `OpenMuQ/MuQ-MuLan-large` (config.json + pytorch_model.bin or
model.safetensors: the whole MuQMuLan state dict, both towers included), the `config.json` of
`OpenMuQ/MuQ-large-msd-iter` (conformer sizes, mel statistics) and `xlm-roberta-base`'s config.json and
tokenizer.json. The sub-models' own weights are not read: the MuQ-MuLan file overrides them anyway.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from torch import nn

from .mulan import MuLan, MuLanConfig
from .muq import MuQConfig
from .roberta import RobertaConfig, XLMRoberta

# Checkpoint keys that the feature path never reads, each with the reason. Anything else that does
# not map onto the model is an error, and so is any model key the checkpoint lacks, except the conformer's
# rotary `embed_positions.inv_freq`: a buffer that the MuQ config determines, checked against that value
# when the file has it (transformers saves it) and derived from the config when it does not.
IGNORED_KEYS: dict[str, str] = {
    r"^mulan\.contrast\.": "contrastive-loss temperatures (training only)",
    r"^mulan\.audio\.aggregator\.": "layer aggregator used only for MERT audio models, not MuQ",
    r"^mulan\.audio\.model\.model\.quantizer_": "MuQ random-projection quantiser (pre-training targets)",
    r"^mulan\.audio\.model\.model\.(rvq|recon_proj)\.": "MuQ pre-training heads",
    r"^mulan\.audio\.model\.model\.linear\.": "MuQ codebook logits head (pre-training)",
    r"^mulan\.audio\.model\.model\.cls_token$": "MuQ cls token (unused by feature extraction)",
    r"^mulan\.audio\.model\.model\.conformer\.pos_conv_embed\.": (
        "built by transformers' Wav2Vec2ConformerEncoder but never applied in its forward"
    ),
    r"^mulan\.text\.model\.embeddings\.(position_ids|token_type_ids)$": "buffers older transformers saved",
}
_IGNORED = [re.compile(p) for p in IGNORED_KEYS]


def is_ignored(key: str) -> bool:
    return any(p.search(key) for p in _IGNORED)


def read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read model config {path}: {exc}") from exc


def weights_file(model_dir: Path) -> Path:
    """The hub mixin saves model.safetensors (newer) or pytorch_model.bin (what MuQ-MuLan-large ships)."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (model_dir / name).is_file():
            return model_dir / name
    raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {model_dir}")


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise ValueError(f"{path} does not hold a state dict")
    return sd


def build_text_model(text_dir: Path) -> XLMRoberta:
    return XLMRoberta(RobertaConfig.from_json(text_dir / "config.json"))  # with its pooler, as muq builds it


def build_mulan(cfg: MuLanConfig, muq_cfg: MuQConfig, text_dir: Path) -> MuLan:
    return MuLan(cfg, muq_cfg, build_text_model(text_dir))


def rotary_tables(module: nn.Module, sd: dict[str, torch.Tensor], prefix: str = "mulan.") -> dict[str, torch.Tensor]:
    """The conformer's rotary `embed_positions.inv_freq` for every RotaryEmbedding in `module`: the file's
    value (transformers saves it as a persistent buffer, and upstream computes with the stored value)
    once it is checked to be the table the MuQ config implies, else (a file without it) that table.
    A stored table with another shape, dtype kind or value is refused with a ValueError."""
    from .muq import RotaryEmbedding

    out: dict[str, torch.Tensor] = {}
    for name, sub in module.named_modules():
        if not isinstance(sub, RotaryEmbedding):
            continue
        key = f"{prefix}{name}.inv_freq"
        want = sub.expected()
        if key not in sd:
            out[key] = want
            continue
        got = sd[key]
        what = (f"MuQ-MuLan checkpoint key {key} must hold the conformer's rotary table "
                f"1/{sub.base:g}^(2i/{sub.head_size}) (head size {sub.head_size} = encoder_dim / heads from the "
                f"MuQ config, {want.numel()} values)")
        if tuple(got.shape) != tuple(want.shape) or not got.is_floating_point():
            raise ValueError(f"{what}, but holds a {got.dtype} tensor of shape {tuple(got.shape)}; "
                             "the file or its MuQ config is wrong")
        g, w = got.detach().to("cpu", torch.float64), want.to(torch.float64)
        rtol = max(1e-6, 4 * torch.finfo(got.dtype).eps)  # a few ulps: another torch / device may round
        err = ((g - w).abs() / w.abs())
        if not bool(torch.isfinite(g).all()) or bool((err > rtol).any()):
            err = torch.where(torch.isfinite(err), err, torch.full_like(err, float("inf")))
            i = int(err.argmax())
            raise ValueError(f"{what}, but value {i} is {float(g[i]):.8g} where {float(w[i]):.8g} is expected "
                             f"(relative error {float(err[i]):.2e} > {rtol:.0e}); the file or its MuQ config is wrong")
        out[key] = got.to(want.dtype)
    return out


def load_weights(module: nn.Module, sd: dict[str, torch.Tensor], prefix: str = "mulan.") -> None:
    """Strict load of `sd` into `module` (keys under `prefix`), skipping only IGNORED_KEYS; the rotary
    tables are checked against the config, or derived from it where the file has none (`rotary_tables`)."""
    expected = {prefix + k: v for k, v in module.state_dict().items()}
    wanted = {k: v for k, v in sd.items() if not is_ignored(k)}
    wanted.update(rotary_tables(module, sd, prefix))
    missing = sorted(set(expected) - set(wanted))
    unexpected = sorted(set(wanted) - set(expected))
    if missing or unexpected:
        raise ValueError(
            "MuQ-MuLan checkpoint does not match the model: "
            f"{len(missing)} missing (first: {missing[:5]}), {len(unexpected)} unexpected (first: {unexpected[:5]})"
        )
    bad = [(k, tuple(wanted[k].shape), tuple(v.shape)) for k, v in expected.items() if wanted[k].shape != v.shape]
    if bad:
        raise ValueError(f"MuQ-MuLan checkpoint shape mismatch (key, file, model): {bad[:5]}")
    state = {k[len(prefix):]: v.to(expected[k].dtype if expected[k].is_floating_point() else v.dtype)
             for k, v in wanted.items()}
    module.load_state_dict(state, strict=True, assign=True)


def check_buffers(module: nn.Module) -> None:
    """Every buffer holds values after loading: the file filled the persistent ones, and the fixed tables
    (the mel front end's) were made on the CPU while the rest was built on the meta device."""
    for name, buf in module.named_buffers():
        if buf.is_meta:
            raise RuntimeError(f"buffer {name} has no value after loading")


TEXT_ALIASES = {"xlm-roberta-base": ("xlm-roberta-base", "FacebookAI/xlm-roberta-base")}


def _hub_dirs(mulan_dir: Path, repo: str) -> list[Path]:
    """Where the hub repo `repo` sits next to the MuQ-MuLan folder, for the two layouts the studio uses:
    a hand-laid `<dir>/<org>/<repo>` tree, and the Hugging Face cache (`models--org--repo/snapshots/*`)."""
    out: list[Path] = []
    ids = TEXT_ALIASES.get(repo, (repo,))
    if mulan_dir.parent.name == "snapshots":  # .../models--OpenMuQ--MuQ-MuLan-large/snapshots/<commit>
        cache = mulan_dir.parent.parent.parent
        for rid in ids:
            root = cache / ("models--" + rid.replace("/", "--"))
            ref = root / "refs" / "main"
            if ref.is_file():
                out.append(root / "snapshots" / ref.read_text().strip())
            snaps = root / "snapshots"
            if snaps.is_dir():
                out += sorted(snaps.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    else:  # <dir>/OpenMuQ/MuQ-MuLan-large
        base = mulan_dir.parent.parent
        out += [base / rid for rid in ids]
    return out


def companion_paths(mulan_dir: Path, cfg: MuLanConfig) -> tuple[Path, Path]:
    """MuQ's config.json and the XLM-R folder for a MuQ-MuLan folder: `mulan_dir/muq/config.json` and
    `mulan_dir/text`, else the repos the MuLan config names, found beside it (see `_hub_dirs`)."""
    muq = [mulan_dir / "muq" / "config.json"] + [d / "config.json" for d in _hub_dirs(mulan_dir, cfg.audio_model_name)]
    text = [mulan_dir / "text"] + _hub_dirs(mulan_dir, cfg.text_model_name)
    muq_hit = next((p for p in muq if p.is_file()), None)
    text_hit = next((d for d in text if (d / "tokenizer.json").is_file() and (d / "config.json").is_file()), None)
    if muq_hit is None or text_hit is None:
        missing = (f"{cfg.audio_model_name} config.json (looked at {', '.join(map(str, muq[:3]))})" if muq_hit is None
                   else f"{cfg.text_model_name} config.json + tokenizer.json (looked at {', '.join(map(str, text[:3]))})")
        raise FileNotFoundError(f"MuQ-MuLan needs {missing}; fetch it with: studio models fetch --only mulan")
    return muq_hit, text_hit
