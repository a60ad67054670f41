"""The lyrics check's cost: seconds per 95 s and 285 s take, and the worker's RSS with Whisper resident.

A real worker process (the test model's DiT and VAE, `--threads`) with a Whisper (`--lyrics-model`)
hears synthetic takes (noise under a lyric layout with a line every 5 s) exactly as the engine checks a
take: windows of whole lines (engine.hearing), the TRANSCRIBE op over the wire, the scoring on the host.
Without `--lyrics-model` it writes a random Whisper: `--size tiny` (the test model's, d_model 32) or
`--size small` (whisper-small's shape: d_model 768, 12+12 layers, 12 heads; random weights, a 272-token
vocabulary instead of 51 865, and `--tokens` decoded per window as a stand-in for a window's words). Random
weights hear nothing: these are costs, never accuracy. The target (issue 30): the check adds <= 10% to a
take's time on a GPU and never delays its first sound (it runs after the take is written, on its own
thread: tests/engine/test_lyrics_check.py holds the order); GPU numbers are only reported where measured.

    .venv/bin/python bench/lyrics_check.py [--size tiny|small] [--threads 2] [--lyrics-model PATH]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

WORDS = ["hello neon night we sing along", "goodbye moon the city lights", "running through the summer rain",
         "hold me close until the dawn"]


def lrc(duration: float) -> str:
    lines = [f"[{int(t // 60):02d}:{t % 60:05.2f}]{WORDS[k % len(WORDS)]}"
             for k, t in enumerate(np.arange(5.0, duration - 5.0, 5.0))]
    return "\n".join(lines) + f"\n[{int((duration - 4) // 60):02d}:{(duration - 4) % 60:05.2f}]\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=["tiny", "small"], default="tiny")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=96, help="tokens decoded per 30 s window (--size small)")
    ap.add_argument("--lyrics-model", default=None, help="a real Whisper checkpoint folder instead")
    ap.add_argument("--durations", default="95,285")
    args = ap.parse_args()

    from engine.hearing import HEAR_RATE, check_audio
    from engine.request import SongRequest, layout_request_lyrics
    from engine.worker_client import Worker
    from studio.testmodel import ensure_test_models, lyric_tokenizer
    from studio.testwhisper import write_tiny_whisper

    models = ensure_test_models()
    tmp = Path(tempfile.mkdtemp(prefix="bench-lyrics-"))
    if args.lyrics_model:
        folder, what = Path(args.lyrics_model), f"checkpoint {Path(args.lyrics_model).name}"
    elif args.size == "small":
        folder = write_tiny_whisper(tmp / "whisper-small-shaped-random", d_model=768, layers=12, heads=12,
                                    max_new_tokens=args.tokens)
        what = f"random weights in whisper-small's shape, {args.tokens} tokens per window"
    else:
        folder, what = Path(models.lyrics), "the test model's tiny random Whisper (d_model 32)"
    tokenizer = lyric_tokenizer()
    rows = []
    with Worker(dit=models.base, vae=models.vae, threads=args.threads, lock_dir=str(tmp / "locks"),
                lyrics_model=str(folder)) as w:
        w.wait_ready(300)
        rss_idle = w.stats().rss_bytes

        heard_s = [0.0]

        def transcribe(audio, windows, language):
            t = time.perf_counter()
            reply = w.transcribe(audio, windows, language, timeout_s=3600)
            heard_s[0] += time.perf_counter() - t
            return reply.model, [(x.text, x.start, x.end) for x in reply.words]

        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        transcribe((rng.standard_normal(HEAR_RATE * 2) * 0.1).astype(np.float32), [[0.0, 2.0]], "en")
        load_s = time.perf_counter() - t0
        for duration in (float(d) for d in args.durations.split(",")):
            layout = layout_request_lyrics(SongRequest(lyrics=lrc(duration), duration=duration), tokenizer=tokenizer)
            report = [r.to_dict() for r in layout.lines]
            audio = (rng.standard_normal(int(HEAR_RATE * duration)) * 0.1).astype(np.float32)
            t0, heard_s[0] = time.perf_counter(), 0.0
            check = check_audio(audio, report, layout.end_frame, transcribe, tokenizer)
            took = time.perf_counter() - t0
            rows.append({"take_s": duration, "check_s": round(took, 3), "worker_s": round(heard_s[0], 3),
                         "host_scoring_s": round(took - heard_s[0], 3), "windows": len(check["windows"]),
                         "lines": len(check["lines"]), "x_realtime": round(took / duration, 4)})
            print(json.dumps(rows[-1]), flush=True)
        rss_resident = w.stats().rss_bytes
    print(json.dumps({"model": what, "device": "cpu", "threads": args.threads, "load_s": round(load_s, 2),
                      "worker_rss_mib_before": round(rss_idle / 2**20), "worker_rss_mib_resident": round(rss_resident / 2**20),
                      "takes": rows,
                      "target": "<= 10% of a take's time on a GPU (not measured here); never delays first sound "
                                "(runs after the take is written)"}, indent=1))


if __name__ == "__main__":
    main()
