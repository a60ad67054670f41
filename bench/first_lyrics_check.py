"""What a worker's first lyrics check costs in CPU, through the plain-torch Whisper (device_worker.transcribe)
beside transformers' `WhisperForConditionalGeneration.generate(return_token_timestamps=True)`, which the
worker ran until this port, on the same checkpoint and audio, in one run.

    .venv/bin/python bench/first_lyrics_check.py [--rounds 3] [--size tiny|small]

Each round runs each way in a fresh process that has imported torch (as a worker has), then loads the
Whisper and hears two 6 s windows twice: "first" is the load and the first call (what a worker pays on
its first sung take: imports included), "again" the second call (the decode itself, resident). `--size
small` is a random checkpoint of whisper-small's shape (768 wide, 12 + 12 layers; 60 tokens per window).
CPU is the process's own user + system time; `import torch` is not counted. Needs transformers (the test
extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

RUN = r"""
import json, sys, time
import numpy as np, torch
folder, way = sys.argv[1], sys.argv[2]
audio = (np.random.default_rng(0).standard_normal(16000 * 12) * 0.1).astype(np.float32)
windows = [(0.0, 6.0), (6.0, 12.0)]
t0 = time.process_time()
if way == "now":
    from device_worker.transcribe import load_transcriber
    t = load_transcriber(folder)
    hear = lambda: t.transcribe(audio, windows, "en")
else:
    from transformers import WhisperForConditionalGeneration, WhisperProcessor
    model = WhisperForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
    proc = WhisperProcessor.from_pretrained(folder)
    def hear():
        clips = [audio[int(a * 16000):int(b * 16000)] for a, b in windows]
        f = proc.feature_extractor(clips, sampling_rate=16000, return_tensors="pt", return_attention_mask=True)
        with torch.inference_mode():
            return model.generate(f.input_features, attention_mask=f.attention_mask, task="transcribe",
                                  language="en", return_token_timestamps=True, return_dict_in_generate=True)
hear()
t1 = time.process_time()
hear()
t2 = time.process_time()
print(json.dumps({"first": t1 - t0, "again": t2 - t1}))
"""


def one(folder: Path, way: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", RUN, str(folder), way], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", choices=["tiny", "small"], default="tiny")
    args = ap.parse_args()
    from studio.testwhisper import write_tiny_whisper

    with tempfile.TemporaryDirectory(prefix="first-check-") as tmp:
        if args.size == "tiny":
            folder = write_tiny_whisper(Path(tmp) / "whisper")  # the test model's
        else:
            folder = write_tiny_whisper(Path(tmp) / "whisper", d_model=768, layers=12, heads=12, max_new_tokens=60)
            gen = json.loads((folder / "generation_config.json").read_text())
            gen["alignment_heads"] = [[5, 3], [7, 0], [9, 11], [11, 2]]
            (folder / "generation_config.json").write_text(json.dumps(gen))
        rows: dict[str, list[dict[str, float]]] = {"now": [], "transformers": []}
        for _ in range(args.rounds):
            for way in rows:
                rows[way].append(one(folder, way))
    print(f"first lyrics check in a fresh process ({args.size} Whisper, two 6 s windows), CPU s, "
          f"median of {args.rounds}, this machine, one run")
    print(f"{'':>14}  {'first':>7}  {'again':>7}")
    med = {w: {k: statistics.median(r[k] for r in v) for k in ("first", "again")} for w, v in rows.items()}
    for way, m in med.items():
        print(f"{way:>14}  {m['first']:7.2f}  {m['again']:7.2f}")
    print(f"ratio transformers / now: first {med['transformers']['first'] / med['now']['first']:.2f}x, "
          f"again {med['transformers']['again'] / med['now']['again']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
