"""The compiled DiT step (torch.compile, static shapes) gives the eager step's song, on the CPU here.

Inductor compiles for the CPU as it does for CUDA (C++ instead of Triton kernels), so the compile path
itself is exercised on every run; the CUDA run of the same check is in tests/model/test_cuda.py.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from _worker_util import Song

from device_worker.model import sampling
from device_worker.model.compiled import CompiledDiT, should_compile
from device_worker.model.load import load_dit
from device_worker.protocol import SongParams


def test_auto_compiles_on_cuda_with_a_working_triton_only(monkeypatch):
    from device_worker.model import compiled

    monkeypatch.setattr(compiled, "has_triton", lambda: True)
    assert should_compile("auto", "cuda:0") and not should_compile("auto", "cpu")
    assert not should_compile("auto", "mps")
    monkeypatch.setattr(compiled, "has_triton", lambda: False)  # Windows, many laptops: no Triton
    assert not should_compile("auto", "cuda:0")
    assert should_compile("on", "cpu") and should_compile("on", "cuda:0") and not should_compile("off", "cuda:0")
    with pytest.raises(ValueError, match="compile must be one of auto, on, off"):
        should_compile("yes", "cpu")


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="torch.compile on the CPU needs a C++ compiler (apt-get install g++)")
def test_compiled_song_equals_eager(reference_dir):
    torch.set_num_threads(1)
    dit = load_dit(reference_dir / "dit-tiny-base")
    song = Song(frames=64, steps=4, seed=3)
    text, style, neg = (torch.from_numpy(a)[None] for a in song.inputs())

    def run(backbone):
        return sampling.sample(backbone, text=text, style=style, negative_style=neg, duration=song.frames,
                               params=SongParams(steps=song.steps, cfg=song.cfg, seed=song.seed))

    eager = run(dit)
    compiled = run(CompiledDiT(dit))
    # Fused kernels reorder float adds: equal to float32 rounding, not bit for bit.
    assert torch.allclose(compiled, eager, rtol=1e-4, atol=1e-5), (compiled - eager).abs().max()
    assert compiled.shape == eager.shape == (1, song.frames, 64)


def test_fused_projections_load_and_write_upstreams_names_and_hold_no_extra_weights(reference_dir):
    """q/k/v and gate/up run as one matmul each from load on (one forward path); a state dict in and out
    keeps upstream's names, so checkpoints, the ttnn converter and tests see the release layout."""
    from device_worker.model.load import read_state_dict

    path = reference_dir / "dit-tiny-full"
    dit = load_dit(path)
    file = read_state_dict(next(path.glob("cfm_model.*")))
    attn, mlp = dit.transformer_blocks[0].self_attn, dit.transformer_blocks[0].mlp
    assert not hasattr(attn, "q_proj") and not hasattr(mlp, "gate_proj")
    d = dit.config.dim
    assert torch.equal(attn.qkv_proj.weight[d: 2 * d], file["transformer_blocks.0.self_attn.k_proj.weight"].float())
    assert torch.equal(mlp.gate_up_proj.weight[: mlp.down_proj.in_features],
                       file["transformer_blocks.0.mlp.gate_proj.weight"].float())
    written = dit.state_dict()
    assert set(written) == set(file)
    assert sum(p.numel() for p in dit.parameters()) == sum(v.numel() for v in file.values())
    again = load_dit(path)
    again.load_state_dict(written)  # the written names load back into a fused model
    torch.manual_seed(0)
    n, b = 40, 2
    cache = dit.prepare(torch.randn(b, n, 64), torch.randint(0, 300, (b, n)), torch.randn(b, 512))
    x = torch.randn(b, n, 64)
    assert torch.equal(again.forward_prepared(x, 0.4, cache), dit.forward_prepared(x, 0.4, cache))
