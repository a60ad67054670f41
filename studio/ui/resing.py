"""The take's "Re-sing missed lines" panel: what the lyrics check heard, a tick per line, one button."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass
class ResingUI:
    group: gr.Accordion
    summary: gr.Markdown
    lines: gr.CheckboxGroup
    go: gr.Button
    note: gr.Markdown


def build() -> ResingUI:
    with gr.Accordion("Re-sing missed lines", open=True, visible=False, elem_id="resing") as group:
        summary = gr.Markdown(elem_id="resing-summary")
        lines = gr.CheckboxGroup(label="Lines to sing again (the missed ones are ticked)", choices=[],
                                 elem_id="resing-lines")
        go = gr.Button("Re-sing ticked lines", elem_id="resing-go")
        note = gr.Markdown(elem_id="resing-note")
    return ResingUI(group, summary, lines, go, note)
