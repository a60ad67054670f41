"""Style: a text prompt (with example chips), a reference recording, or a saved style — one at a time."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

# Chips that fill the prompt: short, concrete prompts MuQ-MuLan text embeddings respond to.
STYLE_CHIPS = [
    "dreamy synthwave, female vocals, 80s drums",
    "acoustic folk, warm guitar, male vocals",
    "energetic pop punk, fast drums",
    "lo-fi hip hop, mellow piano, vinyl crackle",
    "epic orchestral, choir, cinematic",
    "mandopop ballad, piano, emotional female vocals",
    "jazz trio, brushed drums, upright bass",
    "dark techno, driving bass",
]
SOURCES = [("Text", "text"), ("Reference song", "audio"), ("Saved style", "saved")]


@dataclass
class StyleUI:
    source: gr.Radio
    text: gr.Textbox
    chips: gr.Dataset
    audio: gr.Audio
    audio_path: gr.Textbox  # the kept copy in the data dir (hidden): what the request uses
    window_note: gr.Markdown
    saved: gr.Dropdown
    save_name: gr.Textbox
    save: gr.Button
    save_note: gr.Markdown
    text_group: gr.Group
    audio_group: gr.Group
    saved_group: gr.Group


def build() -> StyleUI:
    source = gr.Radio(SOURCES, value="text", label="Style from", elem_id="style-source")
    with gr.Group(visible=True) as text_group:
        text = gr.Textbox(label="Style prompt", elem_id="style-text", max_lines=2,
                          placeholder="e.g. dreamy synthwave, female vocals")
        chips = gr.Dataset(components=[gr.Textbox(visible=False)], samples=[[c] for c in STYLE_CHIPS],
                           label="Examples", elem_id="style-chips", samples_per_page=8)
    with gr.Group(visible=False) as audio_group:
        audio = gr.Audio(label="Reference song (upload or record)", sources=["upload", "microphone"],
                         type="filepath", elem_id="style-audio")
        audio_path = gr.Textbox(visible=False)
        window_note = gr.Markdown(elem_id="style-window")
    with gr.Group(visible=False) as saved_group:
        saved = gr.Dropdown(label="Saved style", choices=[], elem_id="style-saved")
    with gr.Row():
        save_name = gr.Textbox(label="Save this style as", max_lines=1, scale=3)
        save = gr.Button("Save style", scale=1)
    save_note = gr.Markdown()
    return StyleUI(source, text, chips, audio, audio_path, window_note, saved, save_name, save, save_note,
                   text_group, audio_group, saved_group)
