"""Studio peak RSS with many users at once (issue 27 finding 7: 20 users x 2 songs peaked at 873 MB).

    .venv/bin/python bench/users_rss.py [--users 20] [--songs 2] [--frames 64 | --full]

Starts `studio serve --model test` (songs cropped to --frames latent frames, or at full length with
`--full`, one CPU worker); each user
is its own owner token, submitting its songs and following each to the end through the API while the
studio's RSS is sampled every 0.2 s. Prints done/total, the p95 song time and the studio's peak RSS
(target: all done, peak < 500 MB).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from studio_process import rss_mb, serve_test_studio  # noqa: E402 - bench/ is on the path

LRC = "[00:00.50]hello neon night\n[00:02.00]goodbye moon\n[00:03.50]\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--songs", type=int, default=2)
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--full", action="store_true", help="songs at full length (95 s), not cropped")
    args = ap.parse_args()
    from gradio_client import Client

    from studio.identity import Identity

    proc, url, tmp = serve_test_studio("users-rss-", None if args.full else args.frames)
    peak = [0.0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], rss_mb(proc.pid))

    try:
        for _ in range(240):
            try:
                c = Client(url, verbose=False,
                           headers={"Authorization": f"Bearer {Identity(tmp / 'data').cli_token()}"})
                c.predict({"lyrics": LRC, "style_text": "x", "steps": 4}, "", api_name="/submit")
                break
            except Exception as exc:  # noqa: BLE001 - "Loading" until the worker is up
                if "Loading" not in str(exc) and "connect" not in str(exc).lower():
                    break
            time.sleep(1)
        print(f"studio up: RSS {rss_mb(proc.pid):.0f} MB; {args.users} users x {args.songs} songs", flush=True)
        threading.Thread(target=sample, daemon=True).start()
        identity = Identity(tmp / "data")

        def user(i: int) -> list[tuple[str, float]]:
            client = Client(url, verbose=False, headers={"Authorization": f"Bearer {identity.new_token()}"})
            out = []
            for k in range(args.songs):
                t0 = time.monotonic()
                r = client.predict({"lyrics": LRC, "style_text": "dreamy synthwave", "steps": 4,
                                    "formats": ["wav", "mp3"], "title": f"user {i} song {k}"}, "", api_name="/submit")
                final = list(client.submit(r["takes"][0], api_name="/follow"))[-1]
                out.append((final["status"], time.monotonic() - t0))
            return out

        with ThreadPoolExecutor(args.users) as pool:
            results = [x for r in pool.map(user, range(args.users)) for x in r]
        stop.set()
        times = sorted(t for _, t in results)
        done = sum(1 for s, _ in results if s == "done")
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        print(f"done {done}/{len(results)}; p95 {p95:.1f} s; studio peak RSS {peak[0]:.0f} MB "
              f"({'under' if peak[0] < 500 else 'OVER'} the 500 MB target)")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
