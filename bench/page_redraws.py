"""What a page following sixteen takes costs the browser, redrawn at every change beside at most every
`DRAW_GAP_S` (studio/handlers/generate.py), side by side in one run.

    .venv/bin/python bench/page_redraws.py [--seconds 20]

Each round starts an in-process studio on the cropped test model (the browser tests' studio), opens the
page in Debian's Chromium, generates sixteen variations of 200 steps (the page's maxima) and, while they
render, measures for `--seconds`: the progress snapshots the page was sent, the renderer process's CPU
(user + system from /proc), Chromium's own layout count, and a script round trip's median. Needs
/usr/bin/chromium and Playwright's Python package (the test extras).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # the browser tests' studio and helpers
from chromium import ARGS, CHROMIUM  # noqa: E402
from studio_helpers import LRC, descendants, set_advanced, studio_on_test_model  # noqa: E402

import studio.handlers.generate as generate  # noqa: E402


def renderer_cpu_s() -> float:
    """User + system seconds of this process's Chromium renderers (the pages' main threads live there)."""
    total = 0.0
    for pid in descendants(os.getpid()):
        try:
            if "--type=renderer" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def one_round(gap_s: float, seconds: float) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    generate.DRAW_GAP_S = gap_s
    with tempfile.TemporaryDirectory() as tmp, studio_on_test_model(Path(tmp), crop_frames=64) as (url, svc):
        follow, sent = svc.runner.follow, [0]

        def counted(*args, **kwargs):
            for snap in follow(*args, **kwargs):
                sent[0] += 1
                yield snap

        svc.runner.follow = counted
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[*ARGS, "--mute-audio"])
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.goto(url)
                page.wait_for_selector("#lyrics textarea", timeout=60_000)
                page.locator("#lyrics textarea").fill(LRC)
                page.locator("#style-text textarea, #style-text input").first.fill("slow ambient pads")
                set_advanced(page, steps=200, variations=16)
                page.click("#generate")
                page.wait_for_function("(document.querySelector('#progress')?.innerText ?? '').includes('step')",
                                       timeout=60_000)
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")

                def layouts() -> float:
                    return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                                if m["name"] == "LayoutCount")

                n0, cpu0, lay0, t0 = sent[0], renderer_cpu_s(), layouts(), time.monotonic()
                trips = []
                while time.monotonic() - t0 < seconds:
                    s = time.monotonic()
                    page.evaluate("1")
                    trips.append(time.monotonic() - s)
                    time.sleep(0.2)
                dt = time.monotonic() - t0
                out = {"snapshots/s": (sent[0] - n0) / dt, "renderer cores": (renderer_cpu_s() - cpu0) / dt,
                       "layouts/s": (layouts() - lay0) / dt, "round trip ms": statistics.median(trips) * 1000}
                page.click("#cancel")
                return out
            finally:
                browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    gap = generate.DRAW_GAP_S
    every = one_round(0.0, args.seconds)
    gapped = one_round(gap, args.seconds)
    print(f"{'':16}{'every change':>14}{f'gap {gap} s':>14}{'ratio':>8}")
    for key in every:
        print(f"{key:16}{every[key]:14.2f}{gapped[key]:14.2f}{gapped[key] / max(every[key], 1e-9):8.2f}")


if __name__ == "__main__":
    main()
