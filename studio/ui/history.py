"""Sessions: new, search, reopen; the share link with revoke; the read-only banner of a shared view."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass
class HistoryUI:
    new: gr.Button
    query: gr.Textbox
    sessions: gr.Radio
    share: gr.Button
    link: gr.Textbox
    revoke: gr.Button
    share_note: gr.Markdown


@dataclass
class SharedUI:
    banner: gr.Markdown
    copy: gr.Button
    group: gr.Group


def build() -> HistoryUI:
    new = gr.Button("+ New session", elem_id="new-session")
    query = gr.Textbox(label="Search (title, lyrics, style)", max_lines=1, elem_id="search")
    sessions = gr.Radio(label="Sessions", choices=[], elem_id="sessions")
    with gr.Accordion("Share this session", open=False):
        share = gr.Button("Create / show share link", elem_id="share")
        link = gr.Textbox(label="Read-only link", interactive=False, elem_id="share-link", buttons=["copy"])
        revoke = gr.Button("Revoke link", variant="stop", elem_id="revoke")
        share_note = gr.Markdown()
    return HistoryUI(new, query, sessions, share, link, revoke, share_note)


def build_shared() -> SharedUI:
    with gr.Group(visible=False, elem_id="shared-view") as group:
        banner = gr.Markdown(elem_id="shared-banner")
        copy = gr.Button("Copy into my sessions", variant="primary", elem_id="copy-shared")
    return SharedUI(banner, copy, group)
