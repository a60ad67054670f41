"""Compose: title, lyrics editor with its live per-line report, timing helper, instrumental, examples."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from studio.config import LYRIC_EXAMPLES


@dataclass
class ComposeUI:
    title: gr.Textbox
    lyrics: gr.Textbox
    instrumental: gr.Checkbox
    example: gr.Dropdown
    report: gr.HTML
    plain: gr.Textbox
    tempo: gr.Number
    intro: gr.Number
    time_it: gr.Button
    timing_note: gr.Markdown
    tap: gr.HTML


def lyric_examples() -> dict[str, str]:
    """Example lyrics shipped in assets/lyrics (English and Chinese): label -> path. The label says what a
    musician picks: the song's title, its language, and whether it is timed (into the lyrics box) or plain
    (into the timing helper)."""
    if not LYRIC_EXAMPLES.is_dir():
        return {}
    files = sorted(p for p in LYRIC_EXAMPLES.iterdir() if p.suffix in (".lrc", ".txt"))
    return {_example_label(p): str(p) for p in files}


def _example_label(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    title = re.search(r"^\[ti:(.+?)\]\s*$", text, re.MULTILINE)
    name = title.group(1).strip() if title else path.stem.replace("_", " ").replace("-", " ").title()
    language = "Mandarin" if re.search(r"[\u4e00-\u9fff]", text) else "English"
    kind = "timed" if path.suffix == ".lrc" else "plain, for the timing helper"
    return f"{name} ({language}, {kind})"


def build() -> ComposeUI:
    title = gr.Textbox(label="Session title", placeholder="Untitled session", elem_id="title", max_lines=1)
    with gr.Row():
        instrumental = gr.Checkbox(label="Instrumental (no vocals)", value=False, elem_id="instrumental")
        example = gr.Dropdown(label="Start from an example", choices=list(lyric_examples()), value=None,
                              elem_id="example", interactive=True)
    lyrics = gr.Textbox(
        label="Lyrics (LRC: [mm:ss.xx] line — or plain lyrics, timed for you)",
        lines=12, max_lines=40, elem_id="lyrics",
        placeholder="[00:10.00]Neon rain on the window\n[00:14.20]I drive until the morning",
    )
    report = gr.HTML(elem_id="lyric-report")
    with gr.Accordion("Timing helper: plain lyrics (with [Verse]/[Chorus] tags) → timed LRC", open=False):
        plain = gr.Textbox(label="Plain lyrics", lines=6, elem_id="plain-lyrics",
                           placeholder="[Verse]\nNeon rain on the window\n[Chorus]\n...")
        with gr.Row():
            tempo = gr.Number(label="Tempo (BPM, optional)", value=None, precision=0, minimum=40, maximum=240)
            intro = gr.Number(label="Intro length (s, optional)", value=None, minimum=0, maximum=60)
            time_it = gr.Button("Time these lyrics ↑", elem_id="time-it")
        timing_note = gr.Markdown()
        # Tap to time runs in the page (assets/ui/studio.js): each Space press stamps the next line.
        tap = gr.HTML("<div class='tap-row'><button id='tap-time' type='button'>♪ Tap to time</button>"
                      "<span id='tap-status'>Play a take or your style reference, press Space at the start "
                      "of each line: the lyrics box fills with the timed LRC.</span></div>", elem_id="tap")
    return ComposeUI(title, lyrics, instrumental, example, report, plain, tempo, intro, time_it, timing_note, tap)
