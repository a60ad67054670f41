"""What a page following sixteen takes costs the browser, as it was (the progress pane redrawn at every
change, its bars' widths animated), with only the redraws spaced (at most one per `DRAW_GAP_S`,
studio/handlers/generate.py), and as it is (the bars also scaled on the compositor, assets/ui/studio.css),
in one run.

    .venv/bin/python bench/page_redraws.py [--seconds 20]

Each round starts an in-process studio on the cropped test model (the browser tests' studio), opens the
page in Debian's Chromium, generates sixteen variations of 200 steps (the page's maxima) and, while they
render, measures for `--seconds`: the progress snapshots the page was sent, the renderer process's CPU
(user + system from /proc), Chromium's own layout count, and a script round trip's median. Needs
/usr/bin/chromium and Playwright's Python package (the test extras).

A width transition re-lays the page out at every frame while a bar moves; with a redraw every 0.2 s some
bar always moves, so spacing the redraws alone leaves the layouts where they were.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # the browser tests' studio and helpers
from chromium import ARGS, CHROMIUM  # noqa: E402
from studio_helpers import LRC, cpu_seconds, descendants, set_advanced, studio_on_test_model  # noqa: E402

import studio.app as app  # noqa: E402
import studio.handlers.generate as generate  # noqa: E402
from studio import present  # noqa: E402

WIDTH_BARS = ".tp-fill { transform: none !important; transition: width 0.3s; }\n"  # the bars as they were


@contextlib.contextmanager
def as_before(tmp: Path, gap_s: float = 0.0):
    """The page as it was: each bar's width set and animated; every change redrawn (or per `gap_s`)."""
    css, gap, html = app.CSS_FILE, generate.DRAW_GAP_S, present.progress_html
    old_css = tmp / "studio.css"
    old_css.write_text(css.read_text() + WIDTH_BARS)

    def width_bars(*args, **kwargs) -> str:
        return re.sub(r"transform:scaleX\(([\d.]+)\)", lambda m: f"width:{float(m.group(1)) * 100:.0f}%",
                      html(*args, **kwargs))

    app.CSS_FILE, generate.DRAW_GAP_S, present.progress_html = old_css, gap_s, width_bars
    try:
        yield
    finally:
        app.CSS_FILE, generate.DRAW_GAP_S, present.progress_html = css, gap, html


def renderer_cpu_s() -> float:
    """User + system seconds of this process's Chromium renderers (the pages' main threads live there)."""
    total = 0.0
    for pid in descendants(os.getpid()):
        try:
            if "--type=renderer" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                total += cpu_seconds(pid)
        except OSError:
            continue
    return total


def one_round(seconds: float) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

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
    with tempfile.TemporaryDirectory() as tmp:
        with as_before(Path(tmp)):
            before = one_round(args.seconds)
        with as_before(Path(tmp), generate.DRAW_GAP_S):
            spaced = one_round(args.seconds)
    now = one_round(args.seconds)
    print(f"{'':16}{'as it was':>12}{'gap only':>12}{'as it is':>12}{'is/was':>8}")
    for key in before:
        print(f"{key:16}{before[key]:12.2f}{spaced[key]:12.2f}{now[key]:12.2f}{now[key] / max(before[key], 1e-9):8.2f}")


if __name__ == "__main__":
    main()
