"""A seeded lyric fuzzer: hostile and malformed LRC / plain lyrics through the same path the page, the
API and `studio lyrics check` use (`lyrics_problem`, then `layout_request_lyrics`).

Every input either gets a clear ValueError or a layout that fits the model's frame grid; nothing raises
anything else, nothing hangs, and the CLI never prints a traceback. Seeded: a failure reproduces.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest
from lyrics_fixtures import tokenizer, vocab_path  # noqa: F401

from engine.lyrics.g2p import english, espeak_available
from engine.request import SongRequest, layout_request_lyrics, lyrics_problem

SEED, CASES = 20261203, 200

WORDS = ["love", "night", "hello", "world", "你好", "我爱你", "안녕", "🎵", "naïve", "ÆØÅ", "x" * 300,
         "don't", "rock'n'roll", "U.S.A.", "Mr.", "¿qué?", "Ⅻ", "٣٤٥", "ﬁ", "\u200b", "\u202e", "a\u0301"]
NUMBERS = ["42", "1999", "$3.50", "£1,000", "1/2", "3.14", "45%", "21st", "1" * 37, "9" * 400, "0" * 50 + "1",
           "1," * 60 + "1", "$" + "1." * 80 + "1", "1/" * 40]
JUNK = ["\x00", "\x07", "\ufeff", "\u2028", "\r", "\t", "[", "]", "[[", "]]", ":", ".", "...", "!!!", "—", "\\",
        "<script>", "{}", "%s", "\ud7ff", "\U0010ffff"]


def _stamp(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.7:
        return f"[{rng.randint(0, 5):02d}:{rng.uniform(0, 59.99):05.2f}]"
    return rng.choice(["[99:99.99]", "[-1:00.00]", "[00:00]", "[1:2:3]", "[00:01.000000001]", "[ar:someone]",
                       "[00:1e3]", "[nan:00.00]", "[00:01.00][00:02.00]", "[" + "9" * 40 + ":00.00]", "[]"])


def _line(rng: random.Random) -> str:
    parts = rng.choices([WORDS, NUMBERS, JUNK], weights=[6, 2, 2], k=rng.randint(0, 12))
    return " ".join(rng.choice(p) for p in parts)


def _lyrics(rng: random.Random) -> str:
    lines = []
    lrc = rng.random() < 0.75
    for _ in range(rng.choice([0, 1, 3, 10, 40, 120])):
        tag = rng.random()
        if not lrc and tag < 0.1:
            lines.append(rng.choice(["[Verse]", "[Chorus]", "[Bridge 2]", "[]"]))
        lines.append((_stamp(rng) if lrc else "") + _line(rng))
    sep = rng.choice(["\n", "\r\n", "\r", "\n\n"])
    return sep.join(lines)


def _check_layout(layout, request: SongRequest) -> None:
    assert 0 < layout.end_frame <= layout.max_frames
    assert len(layout.tokens) == layout.end_frame
    assert all(isinstance(t, int) and t >= 0 for t in layout.tokens)
    assert layout.duration_s == request.duration
    json.dumps(layout.to_dict(), ensure_ascii=False)  # the page and `--json` serialise it
    assert all(line.status for line in layout.lines)


def test_fuzzed_lyrics_lay_out_or_say_why(tokenizer):  # noqa: F811
    rng = random.Random(SEED)
    refused = laid_out = 0
    english._inflect_engine()  # its import (~4 s of CPU: typeguard instruments it) is no case's time
    for case in range(CASES):
        text, duration = _lyrics(rng), rng.choice([95, 95.0, 96, 120, 285, 200.5])
        # This process's CPU time: a run beside other test processes on two cores once took 20 s of wall
        # time for a case that took a fraction of it in CPU; what other processes do is not the case's.
        started = time.process_time()
        problem = lyrics_problem(text, duration)
        try:
            assert problem is None, problem
            request = SongRequest(lyrics=text, duration=duration)
            layout = layout_request_lyrics(request, tokenizer=tokenizer)
        except (AssertionError, ValueError) as exc:
            assert str(exc).strip(), f"case {case}: an error without a message"
            refused += 1
        else:
            _check_layout(layout, request)
            laid_out += 1
        assert time.process_time() - started < 20, f"case {case} (seed {SEED}) took too long"
    assert laid_out > CASES // 2, (laid_out, refused)  # the fuzzer mostly reaches the layout


@pytest.mark.parametrize("case", range(4))
def test_lyrics_check_never_prints_a_traceback(tmp_path, case, vocab_path):  # noqa: F811
    if not espeak_available():
        pytest.skip("espeak-ng is not installed: `studio lyrics check` exits 2 before laying anything out")
    rng = random.Random(SEED + case)
    path = tmp_path / "song.lrc"
    text = ""
    while len(text.strip()) < 20:
        text = _lyrics(rng).replace("\x00", "")  # a NUL makes it a binary file (refused: its own test)
    path.write_bytes(text.encode("utf-8", "surrogatepass") + rng.choice([b"", b"", b"\xff\xfe"]))
    proc = subprocess.run([sys.executable, "-m", "studio.cli", "lyrics", "check", str(path), "-d",
                           str(rng.choice([95, 285]))], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "STUDIO_LYRICS_VOCAB": str(vocab_path)})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (0, 1, 2), proc.stderr[-3000:]
    assert "verdict:" in proc.stdout or proc.stderr.strip().startswith("error:"), (proc.stdout, proc.stderr)
