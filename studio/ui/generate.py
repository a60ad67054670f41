"""Generate: duration, Advanced settings, edit/continue a take, Generate/Cancel, progress, the finished take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from device_worker import controls
from studio.page_files import signed

SEED_INFO = ("random each time is on: this shows the seed the last Generate drew; untick it to choose "
             "one (the same seed and settings remake the same song)")
EDIT_MODES = [("New song", "none"), ("Regenerate time ranges of a take", "edit"),
              ("Continue a take from a point", "continue")]


@dataclass
class GenerateUI:
    duration: gr.Slider
    steps: gr.Slider
    cfg: gr.Slider
    seed: gr.Textbox
    random_seed: gr.Checkbox
    variations: gr.Slider
    formats: gr.CheckboxGroup
    edit_mode: gr.Radio
    edit_take: gr.Dropdown
    edit_ranges: gr.Textbox
    continue_from: gr.Number
    generate: gr.Button
    cancel: gr.Button
    message: gr.Markdown
    progress: gr.HTML
    preview: gr.Audio


def _slider(c: controls.Control, step: float, **kw: Any) -> gr.Slider:
    return gr.Slider(c.lo, c.hi, value=c.default, step=step, label=c.label, info=c.help, **kw)


def build() -> GenerateUI:
    duration = gr.Slider(95, 285, value=95, step=1,
                         label="Length (s): a 95 s song uses the quick model, 96 to 285 s the long one",
                         elem_id="duration")
    with gr.Accordion("Advanced", open=False):
        with gr.Row():
            steps = _slider(controls.STEPS, 1, elem_id="steps")
            cfg = _slider(controls.CFG, 0.1)
        with gr.Row():
            # Off while "Random seed each time" is on (a 0 there read as "seed 0"); it then shows the seed
            # the last Generate drew, so unticking keeps that take's seed (studio/seedbox.py). A text box:
            # Gradio's number box cannot be empty (it shows 0 for none); the form reads it as a whole number.
            seed = gr.Textbox(label=controls.SEED.label, value="", interactive=False, max_lines=1,
                              placeholder="drawn at each Generate", info=SEED_INFO, elem_id="seed")
            random_seed = gr.Checkbox(label="Random seed each time (recorded per take)", value=True,
                                      elem_id="random-seed")
            variations = _slider(controls.VARIATIONS, 1, elem_id="variations")
        formats = gr.CheckboxGroup(["wav", "flac", "mp3", "ogg"], value=["wav", "flac", "mp3"],
                                   label="Files to write (WAV always)")
    with gr.Accordion("Edit or continue a take", open=False):
        edit_mode = gr.Radio(EDIT_MODES, value="none", label="Mode", elem_id="edit-mode")
        edit_take = gr.Dropdown(label="Source take", choices=[], elem_id="edit-take")
        with gr.Row():
            edit_ranges = gr.Textbox(label="Ranges to regenerate", placeholder="10-20, 1:05-1:20, 80-end",
                                     elem_id="edit-ranges")
            continue_from = gr.Number(label="Continue from (s)", value=30, minimum=0, maximum=285,
                                      elem_id="continue-from")
    with gr.Row(elem_id="gen-buttons"):  # kept in reach on a phone (studio.css)
        # Off until the page's first load hands this browser its key (sessions.on_load -> render): a click
        # before it, on a loaded machine, was answered "this page has no key yet: reload it".
        generate = gr.Button("Generate", variant="primary", elem_id="generate", scale=3, interactive=False)
        cancel = gr.Button("Cancel", variant="stop", elem_id="cancel", scale=1)
    message = gr.Markdown(elem_id="gen-message")
    progress = gr.HTML(elem_id="progress")
    # While a take renders, the page's live player (assets/ui/live.js) plays its decoded windows as they
    # arrive; the finished take plays in the Take player. A second player of the same file here read as two
    # takes (the walk), so this one stays hidden and empty (kept: the follow events still name it).
    preview = signed(gr.Audio(label="Latest finished take", type="filepath", interactive=False, elem_id="preview",
                              buttons=[], visible=False))
    return GenerateUI(duration, steps, cfg, seed, random_seed, variations, formats, edit_mode,
                      edit_take, edit_ranges, continue_from, generate, cancel, message, progress, preview)
