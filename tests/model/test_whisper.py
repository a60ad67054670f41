"""The plain-torch Whisper (device_worker.model.whisper + device_worker.transcribe) against transformers, the
oracle it replaces: on random checkpoints of several shapes, the same log-mel features, the same greedy
tokens (languages given or detected, suppressed tokens, some clips ending early and others running to the
length limit) and the same token times, which is what the old worker read its words from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_whisper import write_tiny_whisper

from device_worker.model.checkpoints import CheckpointError
from device_worker.transcribe import dtw, load_transcriber, token_times

transformers = pytest.importorskip("transformers", reason="transformers is the oracle here (pip install -e '.[test]')")

SR = 16_000
# windows of different lengths, so each clip's alignment is cut to its own audio
SPANS = [(0.0, 5.0), (5.0, 17.0), (20.0, 50.0), (50.0, 51.0), (52.0, 80.0)]


def _audio(seed: int = 7) -> np.ndarray:
    a = (np.random.default_rng(seed).standard_normal(SR * 80) * 0.1).astype(np.float32)
    a[SR * 20:SR * 50] *= np.linspace(0, 3, SR * 30, dtype=np.float32)  # one clip swells: their tokens differ
    return a


def _checkpoint(root: Path, name: str, *, seed: int, eos_pull: float | None = None) -> Path:
    """A random checkpoint of two layers and four heads; `eos_pull` biases the decoder's last norm towards the
    end token by that much, so some clips end early and others do not."""
    folder = write_tiny_whisper(root / name, seed=seed, d_model=64, layers=2, heads=4, max_new_tokens=40)
    gen = json.loads((folder / "generation_config.json").read_text())
    gen.update(alignment_heads=[[0, 1], [1, 0], [1, 3]], suppress_tokens=[5, 6, 7, 200])
    (folder / "generation_config.json").write_text(json.dumps(gen))
    if eos_pull is not None:
        state = load_file(folder / "model.safetensors")
        u = torch.randn(64, generator=torch.Generator().manual_seed(0))
        state["model.decoder.layer_norm.bias"] = u * 0.3
        state["model.decoder.embed_tokens.weight"][gen["eos_token_id"]] = u * eos_pull / u.norm()
        for conv in ("conv1", "conv2"):  # at N(0, 0.02) the audio barely moves the encoder past its positions
            state[f"model.encoder.{conv}.weight"] *= 30.0
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("whisper-oracle")
    return {"tiny": write_tiny_whisper(root / "tiny"), "small-random": _checkpoint(root, "small-random", seed=3),
            "ends-early": _checkpoint(root, "ends-early", seed=21, eos_pull=0.2)}


def _oracle(folder: Path, clips: list[np.ndarray], language: str | None) -> dict:
    model = transformers.WhisperForConditionalGeneration.from_pretrained(str(folder), attn_implementation="eager")
    fe = transformers.WhisperFeatureExtractor.from_pretrained(str(folder))
    feats = fe(clips, sampling_rate=SR, return_tensors="pt", return_attention_mask=True)
    kwargs = {"task": "transcribe", "attention_mask": feats.attention_mask}
    if language:
        kwargs["language"] = language
    out = model.generate(feats.input_features, return_token_timestamps=True, return_dict_in_generate=True, **kwargs)
    return {"mel": feats.input_features, "frames": feats.attention_mask.sum(-1).tolist(),
            "tokens": out["sequences"], "times": out["token_timestamps"].numpy()}


@pytest.mark.parametrize("name,language", [("tiny", "en"), ("small-random", "zh"), ("small-random", None),
                                           ("ends-early", None), ("ends-early", "en")])
def test_features_tokens_and_times_equal_transformers(checkpoints, name, language) -> None:
    audio = _audio()
    clips = [audio[int(a * SR):int(b * SR)] for a, b in SPANS]
    want = _oracle(checkpoints[name], clips, language)
    t = load_transcriber(checkpoints[name])
    mel, frames = t.frontend(clips)
    assert frames == want["frames"]
    torch.testing.assert_close(mel, want["mel"], atol=1e-5, rtol=0)
    d = t.decoding
    encoded = t.model.encode(mel)
    langs = [d.language_id(language)] * len(clips) if language else t.model.detect_language(encoded, d)
    prompt = torch.tensor(d.prompt(langs))
    tokens, weights = t.model.generate(encoded, prompt, d)
    assert torch.equal(tokens, want["tokens"]), (tokens, want["tokens"])
    times = token_times(weights, frames, prompt.shape[1], t.model.config.median_filter_width)
    np.testing.assert_allclose(times, want["times"], atol=1e-6, rtol=0)
    if name == "ends-early":  # the case exists: some clips end, others hit the length limit
        ended = [(row == d.eos).any().item() for row in tokens]
        assert any(ended) and not all(ended)


def test_dtw_equals_transformers_including_ties() -> None:
    from transformers.models.whisper.generation_whisper import _dynamic_time_warping

    rng = np.random.default_rng(0)
    for shape in [(1, 1), (1, 9), (9, 1), (7, 30), (30, 7), (25, 200)]:
        for m in (rng.standard_normal(shape), rng.integers(0, 3, shape).astype(np.float64)):  # integers: many ties
            got, want = dtw(m), _dynamic_time_warping(m)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), shape


def test_a_checkpoint_that_does_not_fit_is_refused_by_name(checkpoints, tmp_path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(checkpoints["tiny"], bad)
    state = load_file(bad / "model.safetensors")
    state.pop("model.decoder.layer_norm.bias")
    save_file(state, str(bad / "model.safetensors"))
    with pytest.raises(CheckpointError, match="model.decoder.layer_norm.bias"):
        load_transcriber(bad)
    gen = json.loads((checkpoints["tiny"] / "generation_config.json").read_text())
    shutil.copy(checkpoints["tiny"] / "model.safetensors", bad / "model.safetensors")
    (bad / "generation_config.json").write_text(json.dumps({**gen, "alignment_heads": [[3, 0]]}))
    with pytest.raises(CheckpointError, match="alignment_heads"):
        load_transcriber(bad)
    with pytest.raises(ValueError, match="'fr' is not one this Whisper knows"):
        load_transcriber(checkpoints["tiny"]).transcribe(_audio()[:SR], language="fr")
