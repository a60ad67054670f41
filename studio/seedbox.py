"""The seed box: what it shows and whether it can be typed in.

While "Random seed each time" is on, the box is greyed out and shows the seed the last Generate drew
(empty before one): a box reading 0 and looking editable suggested every take used seed 0. Unticking it
makes the box editable, keeping the last drawn seed, so "that one again" is one click.
"""

from __future__ import annotations

from typing import Any

import gradio as gr


def shown(random_seed: bool, seed: Any, *, editable: bool = True) -> Any:
    """The box for a form: greyed out and empty while random is on; the fixed seed otherwise."""
    if random_seed:
        return gr.update(value=None, interactive=False)
    return gr.update(value=_whole(seed), interactive=editable)


def drawn(seed: int | None) -> Any:
    """After Generate with random on: the seed it drew, still greyed out."""
    return gr.update(value=seed, interactive=False)


def toggled(random_seed: bool, seed: Any) -> Any:
    """The musician ticked or unticked "Random seed each time"."""
    if random_seed:
        return gr.update(interactive=False)
    return gr.update(value=_whole(seed), interactive=True)


def _whole(seed: Any) -> int:
    try:
        return int(seed)
    except (TypeError, ValueError):
        return 0
