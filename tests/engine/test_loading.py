"""Strict checkpoint loading, configs, and the full-size architecture built on the meta device."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from device_worker.model.config import DiTConfig
from device_worker.model.dit import DiT
from device_worker.model.load import CheckpointError, load_dit, read_state_dict


def release_state(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "cfm_model.pt", map_location="cpu", weights_only=True)["model_state_dict"]


def save_release(state: dict, path: Path) -> Path:
    torch.save({"model_state_dict": state}, path)
    return path


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name", ["base", "full"])
def test_meta_build_matches_release_keys_and_counts(reference_dir: Path, name: str) -> None:
    listed = {}
    for line in (reference_dir / f"full-size-keys-{name}.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            key, shape = line.split("\t")[:2]
            listed[key.removeprefix("transformer.")] = tuple(json.loads(shape))
    with torch.device("meta"):
        dit = DiT(DiTConfig.from_name(f"diffrhythm-1.2-{name}"))
    assert {k: tuple(v.shape) for k, v in dit.state_dict().items()} == listed
    count = sum(p.numel() for p in dit.parameters())
    assert count == {"base": 1_109_315_648, "full": 1_109_709_888}[name]


def test_v1_0_presets_are_causal_without_duration_embedding() -> None:
    for name in ("diffrhythm-1.0-base", "diffrhythm-1.0-full"):
        cfg = DiTConfig.from_name(name)
        assert cfg.causal and not cfg.duration_embed
        with torch.device("meta"):
            assert sum(p.numel() for p in DiT(cfg).parameters()) == 1_109_315_648


def test_folder_file_and_safetensors_load_the_same(tiny_dit_full: Path, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    folder = load_dit(tiny_dit_full)
    assert folder.config.max_frames == 6144 and folder.config.duration_embed and folder.config.conv_layers == 1
    bare = load_dit(tiny_dit_full / "cfm_model.pt")  # no config: inferred from the shapes
    assert bare.config == folder.config and same_weights(bare, folder)
    save_file(release_state(tiny_dit_full), str(tmp_path / "cfm_model.safetensors"))
    st = load_dit(tmp_path / "cfm_model.safetensors", tiny_dit_full / "config.json")
    assert same_weights(st, folder)


def test_config_dict_without_max_frames_infers_it(tiny_dit_base: Path, tiny_dit_full: Path) -> None:
    for folder, frames in ((tiny_dit_base, 2048), (tiny_dit_full, 6144)):
        cfg = json.loads((folder / "config.json").read_text())
        cfg.pop("max_frames")
        assert load_dit(folder / "cfm_model.pt", cfg).config.max_frames == frames


def test_dtype_and_upcast_flags(tiny_dit_base: Path) -> None:
    assert load_dit(tiny_dit_base).dtype == torch.float32
    mixed = load_dit(tiny_dit_base, dtype=torch.bfloat16)
    assert mixed.dtype == torch.bfloat16 and mixed.upcast_residual
    assert not load_dit(tiny_dit_base, dtype=torch.float16, half_mode="upstream").upcast_residual
    with pytest.raises(ValueError, match="half_mode"):
        load_dit(tiny_dit_base, half_mode="fast")


def test_missing_key_is_named(tiny_dit_full: Path, tmp_path: Path) -> None:
    state = release_state(tiny_dit_full)
    del state["transformer.duration_time_embed.time_mlp.2.bias"]
    path = save_release(state, tmp_path / "cfm_model.pt")
    with pytest.raises(CheckpointError, match=r"missing keys \(1\): duration_time_embed\.time_mlp\.2\.bias"):
        load_dit(path, tiny_dit_full / "config.json")


def test_unexpected_key_is_named(tiny_dit_base: Path, tmp_path: Path) -> None:
    state = release_state(tiny_dit_base)
    state["transformer.long_skip_connection.weight"] = torch.zeros(128, 256, dtype=torch.float16)
    path = save_release(state, tmp_path / "cfm_model.pt")
    with pytest.raises(CheckpointError, match=r"unexpected keys \(1\): long_skip_connection\.weight"):
        load_dit(path, tiny_dit_base / "config.json")


def test_v1_0_full_checkpoint_under_v1_2_full_config_is_an_error(tiny_dit_base: Path) -> None:
    # upstream loads non-strictly and then *uses* a random duration embedding; here it is refused
    cfg = json.loads((tiny_dit_base / "config.json").read_text()) | {"max_frames": 6144}
    with pytest.raises(CheckpointError, match="missing keys .*duration_time_embed"):
        load_dit(tiny_dit_base / "cfm_model.pt", cfg)


def test_wrong_shape_is_named(tiny_dit_base: Path, tmp_path: Path) -> None:
    state = release_state(tiny_dit_base)
    state["transformer.proj_out.bias"] = torch.zeros(65, dtype=torch.float16)
    path = save_release(state, tmp_path / "cfm_model.pt")
    with pytest.raises(CheckpointError, match=r"proj_out\.bias: checkpoint \(65,\) vs model \(64,\)"):
        load_dit(path, tiny_dit_base / "config.json")
    with pytest.raises(CheckpointError, match="wrong shapes"):  # tiny weights, release architecture
        load_dit(tiny_dit_base, "diffrhythm-1.2-base")


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickled_code_is_never_run(tiny_dit_base: Path, tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    path = tmp_path / "cfm_model.pt"
    torch.save({"model_state_dict": release_state(tiny_dit_base), "extra": _Payload(marker)}, path)
    with pytest.raises(pickle.UnpicklingError):
        load_dit(path, tiny_dit_base / "config.json")
    assert not marker.exists()


def test_ema_layout_and_unknown_name(tiny_dit_base: Path, tmp_path: Path) -> None:
    ema = {f"ema_model.{k}": v for k, v in release_state(tiny_dit_base).items()}
    ema.update(initted=torch.tensor(True), step=torch.tensor(10))
    torch.save({"ema_model_state_dict": ema}, tmp_path / "ema.pt")
    assert read_state_dict(tmp_path / "ema.pt").keys() == read_state_dict(tiny_dit_base / "cfm_model.pt").keys()
    with pytest.raises(ValueError, match="unknown model name"):
        DiTConfig.from_name("diffrhythm-9")


def test_loading_every_model_and_embedding_a_style_imports_neither_dynamo_nor_transformers(test_models) -> None:
    """What a worker start and a take's style match, decode and lyrics check pay: models built on the meta
    device never reach torch's Python reference ops (their first use imports torch._dynamo, ~1.5 s of CPU),
    the style text tower is plain torch with the `tokenizers` library, and so is Whisper (transformers and
    its generate: ~2.5 s more in each worker's first lyrics check)."""
    code = (
        "import sys\n"
        "from device_worker.model.load import load_dit\n"
        "from device_worker.model.vae import load_vae\n"
        "from device_worker.style import load_style_model\n"
        "import torch\n"
        f"load_dit({test_models.base!r}); vae = load_vae({test_models.vae!r})\n"
        f"style = load_style_model({test_models.style!r}); style.embed_text(['dreamy synth pop'])\n"
        "style.embed_audio(torch.randn(1, 24000 * 12))  # the style match of a take: two 10 s clips\n"
        "with torch.inference_mode(): vae.decode(torch.randn(1, 64, 32))\n"
        "from device_worker.transcribe import load_transcriber\n"
        f"load_transcriber({test_models.lyrics!r}).transcribe(torch.randn(16000 * 12).numpy(), [(0, 6), (6, 12)], 'en')\n"
        "print(sorted(m for m in ('torch._dynamo', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_empty_modules_skips_only_the_init_of_meta_tensors() -> None:
    from device_worker.model.checkpoints import empty_modules

    with empty_modules():
        emb = torch.nn.Embedding(4, 3)
        table = torch.empty(3, device="cpu").fill_(2.0)  # a real tensor made inside: filled as asked
    assert emb.weight.is_meta and torch.equal(table, torch.full((3,), 2.0))
    assert not torch.nn.Embedding(2, 2).weight.is_meta  # the context is left behind
