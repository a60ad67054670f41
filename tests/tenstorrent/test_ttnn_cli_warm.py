"""`studio warm-cache`: refuses clearly without ttnn or a card, and prints a compile table (stand-in card)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from ttnn_fixtures import CARD_CFG, fake_ttnn, random_dit, save_checkpoint  # noqa: F401

from studio.cli.warm import warm_cache

TESTS = Path(__file__).resolve().parents[1]


def _stand_in_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_card: bool = False) -> None:
    """Make the warm subprocess see the stand-in as `ttnn` (test-only: via a sitecustomize on PYTHONPATH)."""
    site = tmp_path / "site"
    site.mkdir()
    lines = ["import sys", f"sys.path.insert(0, {str(TESTS)!r})", "import fake_ttnn", "sys.modules['ttnn'] = fake_ttnn"]
    if no_card:
        lines += ["def _no(*a, **k):", "    raise RuntimeError('TT_FATAL: No chips detected in the cluster')",
                  "fake_ttnn.open_mesh_device = _no"]
    (site / "sitecustomize.py").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("DRS_TTNN_CACHE", str(tmp_path / "cache"))


def test_refuses_without_ttnn_naming_the_environment(tiny_dit_full: Path, tiny_vae: Path) -> None:
    res = CliRunner().invoke(warm_cache, ["--dit", str(tiny_dit_full), "--vae", str(tiny_vae)])
    assert res.exit_code == 1
    assert "needs the ttnn environment" in res.output and "3.12" in res.output


def test_refuses_without_a_card(tiny_dit_full: Path, tiny_vae: Path, tmp_path: Path, monkeypatch) -> None:
    _stand_in_env(tmp_path, monkeypatch, no_card=True)
    res = CliRunner().invoke(warm_cache, ["--dit", str(tiny_dit_full), "--vae", str(tiny_vae)])
    assert res.exit_code == 1 and "needs a Tenstorrent card" in res.output and "No chips" in res.output


def test_compiles_each_shape_and_prints_the_table(tiny_vae: Path, tmp_path: Path, monkeypatch, fake_ttnn) -> None:  # noqa: F811
    ckpt = save_checkpoint(random_dit(31, **CARD_CFG), tmp_path / "dit")
    _stand_in_env(tmp_path, monkeypatch)
    res = CliRunner().invoke(warm_cache, ["--dit", str(ckpt), "--vae", str(tiny_vae), "--windows", "16",
                                          "--seq", "256"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert any(line.startswith("vae:16x1") for line in lines) and any(line.startswith("dit:256x2") for line in lines)
    assert lines[-1].startswith("total")
    assert "[2/2]" in res.output  # progress, one line per shape
    # the next worker on this checkpoint reports what warm-cache compiled (the handshake's READY info)
    from device_worker.backends.ttnn.backend import TtnnBackend

    be = TtnnBackend("0", root=tmp_path / "cache", vae_windows=(16,))
    be.load(str(ckpt), str(tiny_vae), lambda s, f: None)
    info = be.info()
    be.close()
    assert info["kernel_cached_shapes"] == "dit:256x2,vae:16x1" and info["warm_shapes"] == "vae:16x1"
