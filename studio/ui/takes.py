"""Takes: the session's takes and one take in full (player, waveform, lyrics, files, record, actions)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass
class TakesUI:
    listing: gr.Radio
    refresh: gr.Button
    audio: gr.Audio
    waveform: gr.Image
    lyrics_view: gr.Textbox
    files: gr.File
    record: gr.Markdown
    name: gr.Textbox
    rename: gr.Button
    star: gr.Button
    delete: gr.Button
    undo: gr.Button
    retry: gr.Button
    use_settings: gr.Button
    use_reference: gr.Button
    use_edit: gr.Button
    cancel_take: gr.Button
    note: gr.Markdown
    undo_id: gr.Textbox  # hidden: the take "Undo" restores (kept in the page, the row keeps the truth)
    actions: gr.Row


def build() -> TakesUI:
    with gr.Row():
        listing = gr.Radio(label="Takes in this session", choices=[], elem_id="takes", scale=5)
        refresh = gr.Button("↻", scale=0, min_width=40, elem_id="takes-refresh")
    audio = gr.Audio(label="Take", type="filepath", interactive=False, elem_id="take-audio")
    waveform = gr.Image(label="Waveform", interactive=False, height=120, elem_id="take-waveform",
                        buttons=[])
    lyrics_view = gr.Textbox(label="Lyrics (as timed)", lines=6, interactive=False, elem_id="take-lyrics")
    files = gr.File(label="Downloads", file_count="multiple", interactive=False, elem_id="take-files")
    with gr.Row() as actions:
        name = gr.Textbox(label="Name", max_lines=1, scale=3, elem_id="take-name")
        rename = gr.Button("Rename", scale=1, elem_id="take-rename")
        star = gr.Button("☆ Star", scale=1, elem_id="take-star")
        delete = gr.Button("Delete", scale=1, variant="stop", elem_id="take-delete")
        undo = gr.Button("Undo delete", scale=1, visible=False, elem_id="take-undo")
        retry = gr.Button("Retry", scale=1, visible=False, elem_id="take-retry")
    with gr.Row():
        use_settings = gr.Button("Use these settings", elem_id="use-settings")
        use_reference = gr.Button("Use as style reference", elem_id="use-reference")
        use_edit = gr.Button("Edit / continue this take", elem_id="use-edit")
        cancel_take = gr.Button("Cancel this take only", elem_id="take-cancel", variant="stop")
    note = gr.Markdown(elem_id="take-note")
    undo_id = gr.Textbox(visible=False)
    with gr.Accordion("Full record", open=False):
        record = gr.Markdown(elem_id="take-record")
    return TakesUI(listing, refresh, audio, waveform, lyrics_view, files, record, name, rename, star, delete,
                   undo, retry, use_settings, use_reference, use_edit, cancel_take, note, undo_id, actions)
