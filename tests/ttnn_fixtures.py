"""Fixtures for the ttnn backend's CPU tests: the torch-backed stand-in injected as `ttnn`, random DiTs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from device_worker.backends.base import JobSpec
from device_worker.backends.ttnn.reference import DeviceShapedDiT
from device_worker.model.dit import DiT, DiTConfig
from device_worker.model.sampling import make_noise
from device_worker.protocol import SongParams

# Modules that bind `ttnn` at import: dropped before and after each stand-in test so each test gets a fresh
# import against the stand-in and nothing bound to it survives into other tests.
DEVICE_MODULES = ("tt_common", "tt_dit", "tt_trace", "tt_vae", "device", "backend")


def _purge() -> None:
    for name in DEVICE_MODULES:
        sys.modules.pop(f"device_worker.backends.ttnn.{name}", None)


@pytest.fixture
def fake_ttnn(monkeypatch: pytest.MonkeyPatch):
    """The stand-in as `ttnn` (exact float32 storage: see fake_ttnn.core.EXACT) for this test only."""
    import fake_ttnn as fake

    _purge()
    monkeypatch.setitem(sys.modules, "ttnn", fake)
    monkeypatch.setattr(fake.core, "EXACT", True)
    fake.OPENED.clear()
    yield fake
    _purge()


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 shared CI cores; small ops are faster without thread hand-offs
    yield
    torch.set_num_threads(before)


def random_dit(seed: int = 0, *, std: float = 0.02, **overrides) -> DiT:
    """A random DiT (weights N(0, std)), eval mode, float32."""
    kw = dict(dim=128, depth=2, ff_mult=1, conv_layers=1, max_frames=6144) | overrides
    torch.manual_seed(seed)
    dit = DiT(DiTConfig(**kw)).eval().requires_grad_(False)
    for p in dit.parameters():
        p.normal_(0, std)
    return dit


# The smallest shape the card path accepts: 32 heads of 32 (one tile) -> dim 1024.
CARD_CFG = dict(dim=1024, depth=2, ff_mult=1, conv_layers=1, max_frames=6144)


def save_checkpoint(dit: DiT, folder: Path) -> Path:
    """A release-format checkpoint folder (cfm_model.pt with `transformer.` keys + config.json)."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"model_state_dict": {f"transformer.{k}": v for k, v in dit.state_dict().items()}},
               folder / "cfm_model.pt")
    c = dit.config
    model = dict(dim=c.dim, depth=c.depth, heads=32, ff_mult=c.ff_mult, text_dim=c.text_dim,
                 conv_layers=c.conv_layers, mel_dim=c.mel_dim, text_num_embeds=c.text_num_embeds)
    (folder / "config.json").write_text(json.dumps({"model_type": "diffrhythm", "model": model,
                                                    "max_frames": c.max_frames}))
    return folder


def inputs(b: int, n: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """x, cond [b, n, 64], text ids [b, n], style [b, 512]."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, n, 64, generator=g), torch.randn(b, n, 64, generator=g),
            torch.randint(0, 364, (b, n), generator=g), torch.randn(b, 512, generator=g))


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.flatten().double(), b.flatten().double()]))[0, 1])


def song_spec(n: int = 200, steps: int = 3, cond: np.ndarray | None = None, **settings) -> JobSpec:
    g = torch.Generator().manual_seed(5)
    return JobSpec(text=torch.randint(0, 364, (n,), generator=g).numpy(), style=torch.randn(512, generator=g).numpy(),
                   negative_style=torch.randn(512, generator=g).numpy(), cond=cond,
                   song=SongParams(steps=steps, seed=7, **settings), decode_window=16, decode_overlap=4)


def reference_song(dit, spec: JobSpec) -> torch.Tensor:
    """The same song through the device-shaped reference with bf16 matrices (what the cache stores)."""
    ref = DeviceShapedDiT(dit, weight_dtype=torch.bfloat16)
    n = len(spec.text)
    text = torch.from_numpy(spec.text)[None]
    song = ref.prepare(torch.zeros(2, n, 64), torch.cat((text, torch.zeros_like(text))),
                       torch.from_numpy(np.stack([spec.style, spec.negative_style])))
    x, t = make_noise([spec.song.seed], n), torch.linspace(0, 1, spec.song.steps)
    for k in range(spec.song.steps - 1):
        v_c, v_u = ref.forward(torch.cat((x, x)), t[k], song).chunk(2)
        x = x + (t[k + 1] - t[k]) * (v_c + (v_c - v_u) * spec.song.cfg)
    return x[0]
