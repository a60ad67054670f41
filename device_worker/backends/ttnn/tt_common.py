"""Device helpers shared by the DiT and the VAE on the card: uploads, rows, kernel configs, DRAM stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from device_worker.backends.ttnn.precision import DRPrecision
from device_worker.backends.ttnn.runtime import require_ttnn

ttnn = require_ttnn()

MEM = ttnn.DRAM_MEMORY_CONFIG  # everything DRAM-interleaved (spec rule 8); sharding is a later optimisation
TILE = 32


def dtype(name: str) -> Any:
    """"bfloat16" / "bfloat8_b" / "float32" -> the ttnn DataType."""
    return getattr(ttnn, name)


def kernel_config(dev: Any, fidelity: str, fp32_acc: bool = True) -> Any:
    """Compute-kernel config: the fidelity named in DRPrecision, exact (not approximate) SFPU math."""
    return ttnn.init_device_compute_kernel_config(dev.arch(), math_fidelity=getattr(ttnn.MathFidelity, fidelity),
                                                  math_approx_mode=False, fp32_dest_acc_en=fp32_acc,
                                                  packer_l1_acc=False)


def upload(dev: Any, t: torch.Tensor, dt: Any, layout: Any = None) -> Any:
    """A torch tensor onto the card (TILE unless told), DRAM-interleaved."""
    return ttnn.from_torch(t.contiguous(), dtype=dt, layout=layout if layout is not None else ttnn.TILE_LAYOUT,
                           device=dev, memory_config=MEM)


def upload_weight(dev: Any, t: torch.Tensor, dt: Any, cache: Path | None, name: str) -> Any:
    """A weight onto the card; with `cache`, through ttnn's own tensorbin cache (tilized, quantised for
    bfloat8_b), whose file name ttnn suffixes with the dtype and layout."""
    if cache is None:
        return upload(dev, t, dt)
    return ttnn.as_tensor(t.contiguous(), dtype=dt, layout=ttnn.TILE_LAYOUT, device=dev, memory_config=MEM,
                          cache_file_name=str(cache / name))


def rows(dev: Any, v: torch.Tensor, fp32: bool) -> Any:
    """Per-channel rows [b, d] (or [d]) -> [b, 1, 1, d] on the card, fp32 or bf16."""
    v = v.float().reshape(-1, 1, 1, v.shape[-1])
    return upload(dev, v, ttnn.float32 if fp32 else ttnn.bfloat16)


def host_rows(v: torch.Tensor, fp32: bool) -> Any:
    """The same rows as a host tensor (for copy_host_to_device_tensor into a traced input)."""
    v = v.float().reshape(-1, 1, 1, v.shape[-1])
    return ttnn.from_torch(v.contiguous(), dtype=ttnn.float32 if fp32 else ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)


def rope_trans_mat() -> torch.Tensor:
    """[1, 1, 32, 32] T with (x @ T)[2i] = -x[2i + 1], (x @ T)[2i + 1] = x[2i] (adjacent-pair rotation)."""
    m = torch.zeros(1, 1, TILE, TILE)
    m[..., torch.arange(0, TILE, 2), torch.arange(1, TILE, 2)] = 1.0
    m[..., torch.arange(1, TILE, 2), torch.arange(0, TILE, 2)] = -1.0
    return m


def free(*tensors: Any) -> None:
    for t in tensors:
        if t is not None:
            ttnn.deallocate(t)


def dram_stats(dev: Any) -> dict[str, int]:
    """DRAM allocated/free bytes (0s where this ttnn build cannot tell)."""
    try:
        view = ttnn.get_memory_view(dev, ttnn.BufferType.DRAM)
        return {"allocated": int(view.total_bytes_allocated_per_bank * view.num_banks),
                "free": int(view.total_bytes_free_per_bank * view.num_banks)}
    except Exception:  # noqa: BLE001 - diagnostics only
        return {"allocated": 0, "free": 0}


class Configs:
    """The compute-kernel configs of one DRPrecision on one device."""

    def __init__(self, dev: Any, prec: DRPrecision) -> None:
        acc = prec.fp32_dest_acc
        self.mm = kernel_config(dev, prec.mm_fidelity, acc)
        self.sdpa = kernel_config(dev, prec.sdpa_fidelity, acc)
        self.norm = kernel_config(dev, prec.norm_fidelity, True)
        self.conv = kernel_config(dev, prec.norm_fidelity, True)
        self.vae = kernel_config(dev, prec.vae_fidelity, True)
        self.grid = dev.compute_with_storage_grid_size()
