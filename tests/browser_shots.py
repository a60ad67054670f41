"""Feature screenshots for docs/screenshots/: the part of the page a feature lives in, not the whole
page (at full-page scale the detail is too small to read). Written to the test's tmp dir; with
STUDIO_UPDATE_SCREENSHOTS=1 also into docs/screenshots/ (a plain test run must not dirty the checkout)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"


def save_region(page, tmp: Path, name: str, *selectors: str, pad: int = 12) -> Path:
    """A screenshot clipped to the box around every element the selectors match (the first of each)."""
    boxes = []
    for sel in selectors:
        loc = page.locator(sel).first
        loc.scroll_into_view_if_needed()
        box = loc.bounding_box()
        if box:
            boxes.append(box)
    assert boxes, f"nothing to photograph for {name}: {selectors}"
    page.evaluate("window.scrollTo(0, 0)")
    boxes = [page.locator(sel).first.bounding_box() or b for sel, b in zip(selectors, boxes, strict=False)]
    x0 = max(min(b["x"] for b in boxes) - pad, 0)
    y0 = max(min(b["y"] for b in boxes) - pad, 0)
    x1 = max(b["x"] + b["width"] for b in boxes) + pad
    y1 = max(b["y"] + b["height"] for b in boxes) + pad
    return save_page(page, tmp, name, clip={"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0})


def save_page(page, tmp: Path, name: str, clip: dict | None = None) -> Path:
    """A full-page screenshot (or the clip of it) into tmp, and into docs/screenshots/ when asked."""
    path = tmp / name
    # The live player bar is fixed to the window: in a full-page shot it lands over whatever is there.
    hide = "() => document.getElementById('live-player')?.style.setProperty('visibility', '{}')"
    page.evaluate(hide.format("hidden"))
    page.screenshot(path=str(path), full_page=True, clip=clip)
    page.evaluate(hide.format("visible"))
    if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1":  # a test run must not dirty the checkout
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SHOTS / name)
    return path


def save_viewport_below(page, tmp: Path, name: str, selector: str, pad: int = 12) -> Path:
    """A screenshot of the viewport from `selector`'s top to the viewport's bottom: for what is fixed
    to the window (the live player bar) shown together with the part of the page it belongs to."""
    page.locator(selector).first.evaluate("el => el.scrollIntoView({block: 'center'})")
    box = page.locator(selector).first.bounding_box()
    size = page.viewport_size
    assert box and size, f"nothing to photograph for {name}: {selector}"
    y0 = max(box["y"] - pad, 0)
    path = tmp / name
    page.screenshot(path=str(path), clip={"x": 0, "y": y0, "width": size["width"], "height": size["height"] - y0})
    if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SHOTS / name)
    return path
