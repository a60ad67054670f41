"""Studio soak: a long session against a real `studio serve` through its API; the studio's RSS over time.

    .venv/bin/python bench/soak_studio.py [--songs 60] [--in-flight 8] [--frames 64]

Starts `studio serve --model test` (its own data folder, one CPU worker, songs cropped to --frames) and
drives it the way a page and a script do: submit with several takes in flight, follow each to the end,
read the take, list and search sessions, lyric reports, share links. Prints the studio process's RSS
(and its worker's) every few songs, the least-squares slope over the second half, and the verdict against
the targets (studio < 500 MB without weights; flat: < 0.5 MB per song over the second half).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from studio_process import rss_mb, serve_test_studio  # noqa: E402 - bench/ is on the path

LRC = "[00:00.50]hello neon night\n[00:02.00]goodbye moon\n[00:03.50]\n"


def children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p.name))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--songs", type=int, default=60)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--frames", type=int, default=64)
    args = ap.parse_args()

    from gradio_client import Client

    from studio.identity import Identity

    proc, url, tmp = serve_test_studio("soak-studio-", args.frames)
    try:
        client = None
        for _ in range(240):
            try:
                client = Client(url, verbose=False,
                                headers={"Authorization": f"Bearer {Identity(tmp / 'data').cli_token()}"})
                client.predict({"lyrics": "", "style_text": ""}, "", api_name="/submit")
            except Exception as exc:  # noqa: BLE001 - "Loading" until the worker is up; then the refusal
                if client is not None and "Loading" not in str(exc):
                    break
            time.sleep(1)
        start_rss = rss_mb(proc.pid)
        print(f"studio up: RSS {start_rss:.0f} MB (pid {proc.pid}); {args.songs} songs, {args.in_flight} in flight")
        samples: list[tuple[int, float]] = []
        styles = ["dreamy synthwave", "warm jazz, piano", "lofi rain", "sea shanty", "metal, fast drums"]

        def one(i: int) -> str:
            form = {"lyrics": LRC, "style_source": "text", "style_text": styles[i % len(styles)], "duration": 95,
                    "steps": 4, "random_seed": True, "variations": 1 + i % 2, "formats": ["wav", "mp3"][: 1 + i % 2],
                    "title": f"Soak {i}"}
            r = client.predict(form, "", api_name="/submit")
            for t in r["takes"]:
                final = list(client.submit(t, api_name="/follow"))[-1]
                client.predict(t, api_name="/take")
            client.predict("", api_name="/sessions")
            client.predict("soak", api_name="/sessions")
            client.predict(LRC * 20, 95, api_name="/lyrics_report")
            if i % 5 == 0:
                link = client.predict(r["session_id"], api_name="/share")
                client.predict(link["token"], api_name="/shared")
            return final["status"]

        t0 = time.monotonic()
        with ThreadPoolExecutor(args.in_flight) as pool:
            for i, status in enumerate(pool.map(one, range(args.songs)), 1):
                if status != "done":
                    print(f"song {i}: {status}")
                samples.append((i, rss_mb(proc.pid)))
                if i % 5 == 0:
                    workers = sum(rss_mb(c) for c in children(proc.pid))
                    print(f"{i:4d} songs  {time.monotonic() - t0:6.0f} s  studio {samples[-1][1]:6.0f} MB  "
                          f"worker {workers:6.0f} MB")
        half = samples[len(samples) // 2:]
        xs, ys = [x for x, _ in half], [y for _, y in half]
        slope = statistics.linear_regression(xs, ys).slope if len(half) > 2 else 0.0
        peak = max(y for _, y in samples)
        print(f"\nstudio RSS: start {start_rss:.0f} MB, end {samples[-1][1]:.0f} MB, peak {peak:.0f} MB "
              f"(target < 500 MB: {'ok' if peak < 500 else 'OVER'}); slope over the second half "
              f"{slope:+.2f} MB/song ({'flat' if abs(slope) < 0.5 else 'GROWING'})")
    finally:
        proc.terminate()
        proc.wait(60)


if __name__ == "__main__":
    main()
