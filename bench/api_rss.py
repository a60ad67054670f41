"""Studio RSS over many small API calls (issue 27 finding 7: ~270 KB kept per call, never returned).

    .venv/bin/python bench/api_rss.py [--calls 1000] [--capacity N]

Starts `studio serve --model test` and makes `--calls` unauthenticated `/styles` calls as fresh clients
do (raw `POST /gradio_api/call/styles` + reading the answer: each is a new Gradio session), printing the
studio's RSS every 100 calls and the growth over the second half (target: flat, < 20 MB).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
from studio_process import rss_mb, serve_test_studio  # noqa: E402 - bench/ is on the path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    proc, url, tmp = serve_test_studio("api-rss-")
    url = url.rstrip("/")
    try:
        with httpx.Client(timeout=30) as http:
            for _ in range(240):
                try:
                    if http.get(url + "/").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(1)
            marks: dict[int, float] = {}
            for i in range(1, args.calls + 1):
                ev = http.post(f"{url}/gradio_api/call/styles", json={"data": []}).json()["event_id"]
                http.get(f"{url}/gradio_api/call/styles/{ev}").raise_for_status()
                if i % 100 == 0:
                    marks[i] = rss_mb(proc.pid)
                    print(f"{i:5d} calls: studio RSS {marks[i]:.0f} MB", flush=True)
        # Sessions idle past gradio_state.IDLE_S are dropped, so RSS levels off once that window has
        # passed: the second half's growth is the figure (it was ~270 KB per call, never returned).
        half = max(k for k in marks if k <= args.calls // 2)
        print(f"growth over the second half (calls {half}-{args.calls}): {marks[max(marks)] - marks[half]:+.1f} MB")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
