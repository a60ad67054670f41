"""The lyrics check's transcriber: a tiny random Whisper written here in the hub layout, loaded by the
same loader as a real checkpoint, and the TRANSCRIBE op over the real wire to a worker process. Random
weights hear nothing, so these tests check the plumbing (types, times in range, windows, errors, the
model kept resident), never which words come back."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_whisper import write_tiny_whisper

from device_worker.transcribe import Word, group_words, load_transcriber
from engine.worker_client import Worker, WorkerError


@pytest.fixture(scope="module")
def whisper_dir(tmp_path_factory):
    return write_tiny_whisper(tmp_path_factory.mktemp("whisper") / "whisper-tiny-random")


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(seconds * 16000)) * 0.1).astype(np.float32)


def test_group_words_joins_bytes_splits_chinese_drops_punctuation() -> None:
    pieces = [(b" Hel", 0.0, 0.2), (b"lo", 0.2, 0.4), (b",", 0.4, 0.45), (b" world", 0.5, 0.9),
              ("我爱".encode()[:4], 1.0, 1.2), ("我爱".encode()[4:], 1.2, 1.4)]
    words = group_words(pieces)
    texts = [w.text for w in words]
    assert texts[0] == "Hello" and words[0].start == 0.0 and words[0].end == 0.45
    assert "我" in texts and "爱" in texts
    zh = [w for w in words if w.text in "我爱"]
    assert zh[0].end <= zh[1].start + 1e-9  # the word's span shared out in order


def test_tiny_hub_checkpoint_loads_and_transcribes_in_windows(whisper_dir) -> None:
    t = load_transcriber(whisper_dir)
    audio = noise(40.0)
    words = t.transcribe(audio, [(0.0, 20.0), (20.0, 40.0)], language="en")
    assert all(isinstance(w, Word) and 0.0 <= w.start <= w.end <= 40.5 for w in words)
    with pytest.raises(ValueError, match="at most 30 s"):
        t.transcribe(audio, [(0.0, 35.0)])


def test_a_folder_without_alignment_heads_is_refused(whisper_dir, tmp_path) -> None:
    import json
    import shutil

    bad = tmp_path / "no-heads"
    shutil.copytree(whisper_dir, bad)
    gen = json.loads((bad / "generation_config.json").read_text())
    gen.pop("alignment_heads")
    (bad / "generation_config.json").write_text(json.dumps(gen))
    with pytest.raises(ValueError, match="alignment_heads"):
        load_transcriber(bad)
    with pytest.raises(FileNotFoundError, match="not a Whisper checkpoint"):
        load_transcriber(tmp_path)


def test_transcribe_op_over_the_wire(reference_dir, whisper_dir, tmp_path) -> None:
    dit, vae = str(reference_dir / "dit-tiny-base"), str(reference_dir / "vae-tiny" / "vae_model.pt")
    with Worker(dit=dit, vae=vae, threads=1, lock_dir=str(tmp_path), lyrics_model=str(whisper_dir)) as w:
        w.wait_ready(60)
        rss0 = w.stats().rss_bytes
        reply = w.transcribe(noise(12.0), [[0.0, 6.0], [6.0, 12.0]], "en", timeout_s=120)
        assert reply.model.startswith("whisper-tiny-random")
        assert all(0.0 <= x.start <= x.end <= 12.5 for x in reply.words) and reply.seconds > 0
        rss1 = w.stats().rss_bytes
        again = w.transcribe(noise(12.0), [[0.0, 6.0], [6.0, 12.0]], "en", timeout_s=120)
        assert again.words == reply.words  # greedy decoding: the same audio, the same words
        assert again.seconds < reply.seconds  # resident: the second call does not load it again
        assert rss1 >= rss0
        with pytest.raises(WorkerError, match="at most 30 s"):
            w.transcribe(noise(40.0), [[0.0, 40.0]])
    with Worker(dit=dit, vae=vae, threads=1, lock_dir=str(tmp_path)) as w:
        w.wait_ready(60)
        with pytest.raises(WorkerError, match="--lyrics-model"):
            w.transcribe(noise(2.0))
