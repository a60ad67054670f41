"""TtnnBackend through the worker's Backend interface, and the card's open/close, on the ttnn stand-in."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from ttnn_fixtures import (  # noqa: F401
    CARD_CFG,
    fake_ttnn,
    one_thread,
    pcc,
    random_dit,
    reference_song,
    save_checkpoint,
    song_spec,
)

from device_worker.backends.base import JobSpec
from device_worker.model.load import load_dit
from device_worker.model.sampling import Backbone
from device_worker.model.vae import load_vae


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(random_dit(21, **CARD_CFG), tmp_path_factory.mktemp("dit"))


def make(fake, tmp_path: Path, **kw):
    from device_worker.backends import make_backend

    return make_backend("ttnn", "0", root=tmp_path / "cache", vae_windows=(16,), **kw)


def run(be, spec: JobSpec) -> tuple[np.ndarray, list[np.ndarray]]:
    h = be.prepare(spec)
    while h.steps_done < h.steps_total:
        be.step([h])
    lat = be.latent(h)
    blocks = []
    while h.windows_done < h.windows_total:
        blocks.append(be.decode_window(h))
    be.free(h)
    return lat, blocks


def test_a_song_through_the_backend_equals_the_reference_sampler(fake_ttnn, ckpt, tiny_vae, tmp_path) -> None:  # noqa: F811
    be = make(fake_ttnn, tmp_path)
    ids = be.load(str(ckpt), str(tiny_vae), lambda stage, frac: None)
    assert set(ids) == {"dit", "vae"}
    assert isinstance(be.backbone, Backbone)  # the shared sampler drives the card's DiT
    info = be.info()
    assert info["warm_shapes"] == "vae:16x1" and info["grid"] == "11x10" and info["dit.max_frames"] == "6144"
    dev = be.card.dev
    spec = song_spec()
    run(be, spec)  # first song: allocates nothing that stays
    baseline = len(dev.live)
    lat, blocks = run(be, spec)
    assert len(dev.live) == baseline and be.live_jobs() == 0
    dit = load_dit(ckpt)
    want = reference_song(dit, spec)
    assert lat.shape == (200, 64) and np.abs(lat - want.numpy()).max() <= 1e-4 * np.abs(lat).max()
    vae = load_vae(tiny_vae)
    audio = torch.cat(list(vae.decode_windows(torch.from_numpy(lat).t()[None], 16, 4)), -1)[0].numpy()
    assert [b.shape[0] for b in blocks] == [2] * len(blocks)
    np.testing.assert_allclose(np.concatenate(blocks, -1), audio, rtol=1e-5, atol=1e-5)
    be.close()
    assert dev.closed


def test_two_calls_per_step_equal_one_batch2_call(fake_ttnn, ckpt, tiny_vae, tmp_path) -> None:  # noqa: F811
    from device_worker.backends.ttnn.precision import DRPrecision

    spec = song_spec(n=120)
    one = make(fake_ttnn, tmp_path)
    one.load(str(ckpt), str(tiny_vae), lambda s, f: None)
    two = make(fake_ttnn, tmp_path, prec=DRPrecision(batch_branches=False))
    two.load(str(ckpt), str(tiny_vae), lambda s, f: None)
    a, b = run(one, spec)[0], run(two, spec)[0]
    assert np.abs(a - b).max() <= 1e-5 * np.abs(a).max()
    unguided = run(one, song_spec(n=120, cfg=0.0))[0]
    assert np.abs(unguided - a).max() > 1e-3  # cfg 0 really skips the guidance


def test_edit_segments_keep_the_reference_outside(fake_ttnn, ckpt, tiny_vae, tmp_path) -> None:  # noqa: F811
    be = make(fake_ttnn, tmp_path)
    be.load(str(ckpt), str(tiny_vae), lambda s, f: None)
    cond = torch.randn(120, 64, generator=torch.Generator().manual_seed(2)).numpy()
    lat = run(be, song_spec(n=120, cond=cond, edit_segments=[[30, 70]]))[0]
    assert np.array_equal(lat[:30], cond[:30]) and np.array_equal(lat[70:], cond[70:])
    assert not np.allclose(lat[30:70], cond[30:70])


def test_freeing_mid_song_and_decode_only_jobs(fake_ttnn, ckpt, tiny_vae, tmp_path) -> None:  # noqa: F811
    be = make(fake_ttnn, tmp_path)
    be.load(str(ckpt), str(tiny_vae), lambda s, f: None)
    dev = be.card.dev
    run(be, song_spec(n=100))
    baseline = len(dev.live)
    h = be.prepare(song_spec(n=100))
    be.step([h])
    be.free(h)
    be.free(h)  # safe twice
    assert len(dev.live) == baseline and be.live_jobs() == 0
    lat = np.random.default_rng(0).standard_normal((64, 40)).astype(np.float32)
    h = be.prepare(JobSpec(latent=lat, decode_window=16, decode_overlap=4))
    assert h.steps_total == 0 and h.windows_total == 3
    got = np.concatenate([be.decode_window(h) for _ in range(h.windows_total)], -1)
    want = torch.cat(list(load_vae(tiny_vae).decode_windows(torch.from_numpy(lat)[None], 16, 4)), -1)[0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    be.free(h)


def test_single_forward_matches_the_core(fake_ttnn, ckpt, tiny_vae, tmp_path) -> None:  # noqa: F811
    be = make(fake_ttnn, tmp_path)
    be.load(str(ckpt), str(tiny_vae), lambda s, f: None)
    g = torch.Generator().manual_seed(3)
    t = {"x": torch.randn(1, 64, 64, generator=g).numpy(), "cond": torch.zeros(1, 64, 64).numpy(),
         "text": torch.randint(0, 364, (1, 64), generator=g).numpy(), "time": np.array(0.25, np.float32),
         "style_prompt": torch.randn(1, 512, generator=g).numpy()}
    got = torch.from_numpy(be.forward(t, False, False, False))
    dit = load_dit(ckpt)
    with torch.inference_mode():
        want = dit(*(torch.from_numpy(t[k]) for k in ("x", "cond", "text", "time")), style_prompt=torch.from_numpy(t["style_prompt"]))
    assert pcc(got, want) >= 0.9999  # bf16-stored matrices vs the fp32 core


def test_checkpoints_sharing_a_cache_root_never_share_weights(fake_ttnn, ckpt, tiny_vae, tmp_path) -> None:  # noqa: F811
    other = save_checkpoint(random_dit(22, **CARD_CFG), tmp_path / "other")
    g = torch.Generator().manual_seed(4)
    t = {"x": torch.randn(1, 32, 64, generator=g).numpy(), "cond": torch.zeros(1, 32, 64).numpy(),
         "text": torch.randint(0, 364, (1, 32), generator=g).numpy(), "time": np.array(0.5, np.float32),
         "style_prompt": torch.randn(1, 512, generator=g).numpy()}
    for path in (ckpt, other, ckpt):  # second load of the first checkpoint reads its caches
        be = make(fake_ttnn, tmp_path)
        be.load(str(path), str(tiny_vae), lambda s, f: None)
        got = torch.from_numpy(be.forward(t, False, False, False))
        be.close()
        with torch.inference_mode():
            want = load_dit(path)(*(torch.from_numpy(t[k]) for k in ("x", "cond", "text", "time")),
                                  style_prompt=torch.from_numpy(t["style_prompt"]))
        assert pcc(got, want) >= 0.9999, path
    assert len(list((tmp_path / "cache" / "weights").glob("*.safetensors"))) == 2


def test_the_card_is_opened_as_a_p100a_needs_and_closed_once(fake_ttnn, tmp_path, monkeypatch) -> None:  # noqa: F811
    from device_worker.backends.ttnn.device import Card, DeviceSettings, parse_device

    monkeypatch.delenv("TT_METAL_CACHE", raising=False)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # do not touch pytest's handlers
    cwd = os.getcwd()
    card = Card(DeviceSettings(root=tmp_path, trace=True))
    dev = card.open()
    kw = dev.open_kwargs
    assert kw["l1_small_size"] == 98304 and kw["trace_region_size"] > 0
    assert kw["dispatch_core_config"].type == fake_ttnn.DispatchCoreType.WORKER
    assert kw["mesh_shape"] == fake_ttnn.MeshShape(1, 1)
    assert os.getcwd() == cwd and (tmp_path / "scratch").is_dir()
    assert os.environ["TT_METAL_CACHE"] == str(tmp_path / "tt-metal-cache")
    assert "TT_METAL_OPERATION_TIMEOUT_SECONDS" in os.environ
    card.close()
    card.close()  # second close is a no-op (the stand-in raises on a double close)
    assert Card(DeviceSettings(root=tmp_path)).open().open_kwargs["trace_region_size"] == 0
    assert parse_device("0") == 0 and parse_device("tt:1") == 1
    with pytest.raises(ValueError, match="Tenstorrent"):
        parse_device("cpu")
