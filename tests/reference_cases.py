"""Reading the upstream reference cases (`../shared/reference/diffrhythm/cases`) for the model-core tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from device_worker.protocol import SongParams


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # the CI machine has 2 shared cores; tiny ops run ~50x faster without thread hand-offs
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def load_case(reference_dir: Path, name: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """(the case's JSON, its tensors) for `cases/<name>.{json,safetensors}`."""
    from safetensors.torch import load_file

    meta = json.loads((reference_dir / "cases" / f"{name}.json").read_text())
    return meta, load_file(str(reference_dir / "cases" / f"{name}.safetensors"))


FP32_CASES = ["sampler_base_lyrics", "sampler_full_instrumental", "sampler_full_edit", "sampler_base_cfg0"]


def song_kwargs(meta: dict, t: dict[str, torch.Tensor]) -> dict:
    # text ids come from the case (lyric layout is tested elsewhere); everything else from its JSON
    return dict(
        text=t["text"], style=t["style"], negative_style=t["negative_style"], duration=meta["N"],
        cond=t["cond"],
        params=SongParams(edit_segments=meta["latent_pred_segments"], steps=meta["steps"], cfg=meta["cfg_strength"],
                          sway=meta["sway_sampling_coef"], seed=meta["seed"], start_time=meta["start_time"]),
    )


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()
