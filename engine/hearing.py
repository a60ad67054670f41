"""The lyrics check of a finished take (issue 30): its audio heard by the worker's Whisper, line by line.

    take written (playable, TakeDone sent) -> checker thread: WAV read back, 16 kHz mono
        -> windows of whole lines (<= 30 s) -> TRANSCRIBE on a worker -> engine.lyrics.heard scores
        -> `lyrics_check` added to the take's record.json -> LyricsChecked event

It runs on its own thread after the take is written, so it never holds up a take's first sound or its
TakeDone; the job's terminal Done waits for it (subscribers hear every check before the job ends).
The same `check_audio` serves `studio lyrics heard TAKE.wav`. A check that fails is recorded as
absent with the reason and never costs the take.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from device_worker.shapes import FRAME_RATE, SAMPLE_RATE
from engine.lyrics.heard import (
    SLACK_S,
    HeardWord,
    LineWindow,
    check_lyrics,
    line_windows,
    tokenizer_phonemize,
)

logger = logging.getLogger(__name__)

HEAR_RATE = 16_000  # Whisper hears 16 kHz mono
WINDOW_S = 30.0  # Whisper's input span: windows are cut at line starts, never inside a line
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

# (16 kHz mono audio, windows [[a, b], ...], language) -> (model id, [(text, start, end), ...])
Transcribe = Callable[[np.ndarray, list[list[float]], str], tuple[str, list[tuple[str, float, float]]]]


def hear_windows(lines: Sequence[LineWindow], total_s: float, slack_s: float = SLACK_S,
                 limit_s: float = WINDOW_S) -> list[list[float]]:
    """Spans to transcribe: consecutive lines grouped into windows of at most `limit_s`, cut at line
    starts (so no sung line is split, unless one line alone is longer than a window), widened by the
    slack at the song's first and last line only (windows never overlap: a word heard twice would read
    as a stutter)."""
    if not lines:
        return []
    out: list[list[float]] = []
    a = max(0.0, lines[0].start - slack_s)
    end_all = min(total_s, lines[-1].end + slack_s)
    b = a
    for k, ln in enumerate(lines):
        stop = end_all if k == len(lines) - 1 else min(ln.end, total_s)
        if stop - a > limit_s and b > a:  # this line does not fit: close the window at its start
            out.append([a, b])
            a = b
        while stop - a > limit_s:  # a line longer than a window: cut it in full windows
            out.append([a, a + limit_s])
            a += limit_s
        b = stop
    if b > a:
        out.append([a, b])
    return [[round(x, 3), round(y, 3)] for x, y in out]


def language_of(texts: Sequence[str]) -> str:
    """Whisper's language hint: "zh" when the lyrics are mostly Chinese characters, else "en" (mixed
    lyrics are English-led in DiffRhythm's training data; auto-detection on singing guesses badly)."""
    text = " ".join(texts)
    cjk = len(_CJK.findall(text))
    latin = len(re.findall(r"[A-Za-z]+", text))
    return "zh" if cjk > latin else "en"


def to_hearing(audio: np.ndarray, rate: int = SAMPLE_RATE) -> np.ndarray:
    """Stereo float [2, n] (or mono [n]) at `rate` -> 16 kHz mono float32 [m]."""
    from device_worker.audio import resample

    x = np.asarray(audio, dtype=np.float32)
    mono = x.mean(axis=0) if x.ndim == 2 else x
    return resample(np.ascontiguousarray(mono), rate, HEAR_RATE)


def read_hearing(path: str | Path) -> np.ndarray:
    """A take's audio file -> 16 kHz mono float32."""
    import soundfile as sf

    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return to_hearing(data.T, int(rate))


def check_audio(audio_16k: np.ndarray, report: Sequence[dict], end_frame: int, transcribe: Transcribe,
                tokenizer: Any) -> dict[str, Any]:
    """Hear `audio_16k` and score every sung line of `report` (a record's `lyrics_report`) -> the
    `lyrics_check` dict: model, per, sung_share, lines, notes, windows, seconds."""
    t0 = time.perf_counter()
    total_s = len(audio_16k) / HEAR_RATE
    end_frame = min(int(end_frame), int(total_s * FRAME_RATE))
    lines = line_windows(report, end_frame)
    if not lines:
        return {"model": "", "per": None, "sung_share": 1.0, "lines": [], "windows": [],
                "notes": ["no sung line to check"], "seconds": 0.0}
    windows = hear_windows(lines, total_s)
    language = language_of([ln.text for ln in lines])
    model, words = transcribe(audio_16k, windows, language)
    heard = [HeardWord(str(t), float(a), float(b)) for t, a, b in words]
    check = check_lyrics(lines, heard, tokenizer_phonemize(tokenizer, language), model=model).to_dict()
    check.update(windows=windows, language=language, heard_words=len(heard),
                 seconds=round(time.perf_counter() - t0, 3))
    return check


def checkable(record: dict[str, Any]) -> str | None:
    """Why a take is not checked (None: it is): instrumental, or no sung line in its layout."""
    request = record.get("request") or {}
    if request.get("instrumental") or not str(request.get("lyrics") or "").strip():
        return "instrumental: nothing to hear"
    if not any(r.get("status") in ("sung", "pushed", "truncated") and r.get("tokens")
               for r in record.get("lyrics_report") or []):
        return "no sung line in the layout"
    return None


def end_frame_of(record: dict[str, Any]) -> int:
    effective = record.get("effective") or {}
    frames = effective.get("frames")
    seconds = (record.get("audio") or {}).get("seconds")
    if frames is None:
        return int((seconds or 0) * FRAME_RATE)
    return int(frames)


def add_to_record(path: str | Path, check: dict[str, Any]) -> dict[str, Any]:
    """Store `check` as the record's `lyrics_check` (written under a temporary name, then renamed: a
    reader sees the old record or the new one, never half of one)."""
    path = Path(path)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["lyrics_check"] = check
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return record


class LyricsChecker:
    """One thread that checks finished takes in the order they were written. `submit(files, done)`
    returns at once; `done(check)` is called with the stored `lyrics_check` (or one saying why it is
    absent) after the record was updated."""

    def __init__(self, transcribe: Transcribe, tokenizer: Callable[[], Any]) -> None:
        self._transcribe, self._tokenizer = transcribe, tokenizer
        self._q: queue.Queue[tuple[dict[str, str], Callable[[dict[str, Any]], None]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="engine-lyrics-check", daemon=True)
        self._thread.start()

    def submit(self, files: dict[str, str], done: Callable[[dict[str, Any]], None]) -> None:
        self._q.put((files, done))

    def _loop(self) -> None:
        while (item := self._q.get()) is not None:
            files, done = item
            check = self.check_files(files)
            try:
                done(check)
            except Exception:  # noqa: BLE001 - a listener's failure is not the checker's
                logger.exception("lyrics check listener failed")

    def check_files(self, files: dict[str, str]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            record = json.loads(Path(files["json"]).read_text(encoding="utf-8"))
            why = checkable(record)
            if why is not None:
                return {"model": "", "per": None, "lines": [], "skipped": why}
            audio = read_hearing(files.get("wav") or next(v for k, v in files.items() if k != "json"))
            check = check_audio(audio, record.get("lyrics_report") or [], end_frame_of(record),
                                self._transcribe, self._tokenizer())
            check["seconds"] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001 - a check that fails must not cost the take
            logger.warning("lyrics check of %s failed: %s", files.get("json"), exc)
            check = {"model": "", "per": None, "lines": [], "error": f"{type(exc).__name__}: {exc}"}
        try:
            add_to_record(files["json"], check)
        except Exception as exc:  # noqa: BLE001
            logger.warning("lyrics check not stored in %s: %s", files.get("json"), exc)
        return check

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=30)
