"""MuQ-MuLan against upstream: every case of `../shared/reference/muq/` (embeddings computed by the real
`muq` 0.1.0 package on tiny random weights in the released hub layout, see its README.md), through the
API the worker uses (`load_style_model` -> `embed_audio` / `embed_text`, files via
`engine.style.style_window`). Also: the loader's rotary-table check and its strictness on that file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")

from device_worker.style import load_style_model  # noqa: E402
from engine.style import style_window  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("STUDIO_SHARED_DIR", ROOT.parent / "shared"))
MUQ_REF = SHARED / "reference" / "muq"
ROTARY_KEY = "mulan.audio.model.model.conformer.embed_positions.inv_freq"


def _manifest() -> dict | None:
    try:
        return json.loads((MUQ_REF / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


MANIFEST = _manifest()
CASES = MANIFEST["cases"] if MANIFEST else []
SKIP_WHY = f"MuQ-MuLan oracle set not found at {MUQ_REF} (CI keeps ../shared beside the checkout)"


def _paths(ref: Path) -> dict[str, Path]:
    p = MANIFEST["paths"]
    return {"mulan": ref / p["mulan"], "muq_config": ref / p["muq_config"], "text": ref / p["text"]}


def _load(mulan_dir: Path):
    p = _paths(MUQ_REF)
    return load_style_model(mulan_dir, muq_config=p["muq_config"], text_dir=p["text"])


@pytest.fixture(scope="module")
def ref_model():
    if MANIFEST is None:
        pytest.skip(SKIP_WHY)
    torch.set_num_threads(2)
    return _load(_paths(MUQ_REF)["mulan"])


def _tolerance(case: dict) -> float:
    tol = MANIFEST["tolerance"]
    rel = float(tol["rel"])
    if case.get("tolerance_kind") == "file" and tol.get("file_rel") is not None:
        return float(tol["file_rel"])
    return rel


def _array_input(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        x = np.load(path, allow_pickle=False)
    else:
        import soundfile as sf

        x, rate = sf.read(str(path), dtype="float32", always_2d=False)
        assert rate == 24_000 and x.ndim == 1, (path, rate, x.shape)
    return np.asarray(x, dtype=np.float32)


def _rel(ours: np.ndarray, upstream: np.ndarray) -> float:
    return float(np.linalg.norm(ours.astype(np.float64) - upstream) / np.linalg.norm(upstream.astype(np.float64)))


@pytest.mark.parametrize("case", CASES or [None], ids=[c["name"] for c in CASES] or ["no-oracle-set"])
def test_case_matches_upstream(ref_model, case):
    upstream = np.load(MUQ_REF / case["output"], allow_pickle=False).astype(np.float32)
    assert upstream.shape == (1, 512)
    kind = case["kind"]
    if kind == "audio_array":
        x = _array_input(MUQ_REF / case["input"])
        assert x.shape == (case["samples"],)
        ours = ref_model.embed_audio(torch.from_numpy(x)[None]).numpy()
    elif kind == "audio_file":
        w = style_window(MUQ_REF / case["input"])
        assert w.start_s == case["window_start_s"] and w.samples.shape == (case["window_samples"],)
        assert -(-w.samples.shape[0] // ref_model.clip_samples) == case["clips"]
        ours = ref_model.embed_audio(torch.from_numpy(w.samples)[None]).numpy()
    elif kind == "text":
        ids, _ = ref_model.tokenizer(case["text"])
        assert ids[0].tolist() == case["upstream_token_ids"]
        if not case["text"].strip():
            with pytest.raises(ValueError, match="empty"):  # the project's documented refusal
                ref_model.embed_text([case["text"]])
            return
        ours = ref_model.embed_text([case["text"]]).numpy()
    else:
        pytest.fail(f"unknown case kind {kind!r}")
    assert ours.shape == (1, 512) and ours.dtype == np.float32
    rel = _rel(ours, upstream)
    print(f"{case['name']}: rel={rel:.2e}")
    assert rel <= _tolerance(case), f"{case['name']}: rel {rel:.3e} > {_tolerance(case)}"


def test_window_fixtures_match_the_librosa_window():
    """Where the set holds librosa's exact window of a file, style_window reads the same samples."""
    if MANIFEST is None:
        pytest.skip(SKIP_WHY)
    for case in (c for c in CASES if c["kind"] == "audio_file"):
        stem = Path(case["input"]).stem
        fixture = MUQ_REF / "inputs" / f"{stem}_window24k.npy"
        if not fixture.is_file():
            continue
        ours = style_window(MUQ_REF / case["input"]).samples
        want = np.load(fixture, allow_pickle=False)
        assert ours.shape == want.shape
        np.testing.assert_allclose(ours, want, rtol=0, atol=1e-6)


@pytest.fixture()
def file_copy(tmp_path):
    """A writable copy of the oracle's MuQ-MuLan folder and its state dict, to alter."""
    if MANIFEST is None:
        pytest.skip(SKIP_WHY)
    src = _paths(MUQ_REF)["mulan"]
    dst = tmp_path / "MuQ-MuLan-large"
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    sd = torch.load(src / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return dst, sd


def test_stored_rotary_table_is_checked_and_used(file_copy):
    dst, sd = file_copy
    model = _load(_paths(MUQ_REF)["mulan"])
    conformer = model.mulan.audio.model.model.conformer
    assert torch.equal(conformer.embed_positions.inv_freq, sd[ROTARY_KEY])
    # a file without the buffer loads too (the table is derived from the MuQ config), same embeddings
    sd.pop(ROTARY_KEY)
    torch.save(sd, dst / "pytorch_model.bin")
    x = torch.randn(1, 30_000, generator=torch.Generator().manual_seed(3)) * 0.1
    assert torch.allclose(_load(dst).embed_audio(x), model.embed_audio(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("corrupt,message", [
    (lambda t: torch.cat([t[:2], t[2:3] * 1.01, t[3:]]), r"value 2 is 0\.101 where 0\.1 is expected"),
    (lambda t: 1.0 / (500.0 ** (torch.arange(0, 16, 2).float() / 16)), r"relative error"),  # other base
    (lambda t: t.flip(0), r"rotary table 1/10000\^\(2i/16\)"),
    (lambda t: torch.cat([t, t]), r"shape \(16,\)"),
    (lambda t: t.to(torch.int64), r"torch\.int64"),
    (lambda t: t.clone().fill_(float("nan")), r"is nan where"),
])
def test_wrong_rotary_table_is_refused(file_copy, corrupt, message):
    dst, sd = file_copy
    sd[ROTARY_KEY] = corrupt(sd[ROTARY_KEY])
    torch.save(sd, dst / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"embed_positions\.inv_freq must hold the conformer's rotary table"):
        _load(dst)
    with pytest.raises(ValueError, match=message):
        _load(dst)


def test_other_unexpected_and_missing_keys_are_still_refused(file_copy):
    dst, sd = file_copy
    sd["mulan.audio.model.model.conformer.embed_positions.extra"] = torch.zeros(8)
    torch.save(sd, dst / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"0 missing .*1 unexpected .*embed_positions\.extra"):
        _load(dst)
    sd.pop("mulan.audio.model.model.conformer.embed_positions.extra")
    sd.pop("mulan.audio.model.model.conformer.layer_norm.weight")
    torch.save(sd, dst / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"1 missing .*conformer\.layer_norm\.weight.*0 unexpected"):
        _load(dst)
