"""Takes: the session's takes and one take in full (player, waveform, lyrics, files, record, actions)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from studio.page_files import signed
from studio.ui import resing as resing_ui

SORTS = ["newest first", "best style match first", "most words sung first"]  # handlers.takes.TakeHandlers.listing knows each
# Lists of ids (takes, sessions) whose stale value reads as "nothing picked" (`_stale_reads_as_none`).
ID_LISTS = frozenset({"takes", "sessions"})


def _stale_reads_as_none(cls: type[gr.Radio]) -> None:
    """A take or session id that is no longer among its list's choices reads as no selection instead of
    failing the event ("Value ... is not in the list of choices"). Such a value is left behind when a
    redraw and a follow of the list cross (a switch of session or owner while a take renders): the event
    it rides on then failed as a bare "Error". Nothing is trusted from it either way: every handler checks
    an id against the owner (`studio.access`). On the class, because Gradio rebuilds a component from its
    class for every update; only the lists named in `ID_LISTS` are affected."""
    plain = cls.preprocess
    if getattr(plain, "_stale_ok", False):
        return

    def preprocess(self: gr.Radio, payload: str | int | float | None) -> str | int | float | None:
        if self.elem_id in ID_LISTS and payload is not None and payload not in [v for _, v in self.choices]:
            return None
        return plain(self, payload)

    preprocess._stale_ok = True  # type: ignore[attr-defined]
    cls.preprocess = preprocess  # type: ignore[method-assign]


_stale_reads_as_none(gr.Radio)


@dataclass
class TakesUI:
    listing: gr.Radio
    sort: gr.Radio
    refresh: gr.Button
    audio: gr.Audio
    lyric_lines: gr.HTML  # the take's timed lyrics, lit as it plays (assets/ui/studio.js)
    waveform: gr.HTML  # the take's waveform with draggable regions (assets/ui/regions.js)
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
    shown: gr.Textbox  # hidden: the take whose detail is drawn (handlers.takes.show_take)
    actions: gr.Row
    ab: gr.Accordion
    ab_a: gr.Dropdown
    ab_b: gr.Dropdown
    ab_players: gr.HTML
    delete_cancelled: gr.Button
    # hidden, written by a follow as it ends (handlers.takes.show_finished): the ids of the takes it followed,
    # and the take picked in the list when it began
    followed: gr.Textbox
    picked_before: gr.Textbox
    # hidden, written by Retry and Re-sing: the take the click started, which the follow after it follows
    # even if it ended before that follow began (on a loaded machine a cropped take can)
    started: gr.Textbox
    resing: resing_ui.ResingUI  # what the lyrics check heard, and re-singing lines (studio.handlers.heard)


def build() -> TakesUI:
    with gr.Row():
        listing = gr.Radio(label="Takes in this session", choices=[], elem_id="takes", scale=5)
        refresh = gr.Button("↻", scale=0, min_width=40, elem_id="takes-refresh")
    sort = gr.Radio(SORTS, value=SORTS[0], label="Order", elem_id="takes-sort")
    with gr.Row(elem_id="takes-tidy"):
        # Hiding is the browser's (assets/ui/takes.js keeps it across reloads); deleting is the server's.
        gr.HTML("<label class='hide-cancelled'><input type='checkbox' id='hide-cancelled-box'> "
                "Hide cancelled takes</label>", elem_id="hide-cancelled")
        delete_cancelled = gr.Button("Delete cancelled takes", size="sm", scale=0, min_width=180,
                                     elem_id="delete-cancelled")
    # The plain player keeps its <audio> in the page, so the lyric lines can follow and seek it (the
    # waveform picture below shows the shape).
    # `signed`: it plays signed file URLs (studio/page_files.py), never a server path.
    audio = signed(gr.Audio(label="Take", type="filepath", interactive=False, elem_id="take-audio",
                            waveform_options=gr.WaveformOptions(show_recording_waveform=False)))
    lyric_lines = gr.HTML(elem_id="lyric-lines")
    resing = resing_ui.build()
    # Drag regions on it to repaint or extend them (studio/waveform.py sends the peaks).
    waveform = gr.HTML(elem_id="take-regions")
    lyrics_view = gr.Textbox(label="Lyrics (as timed)", lines=6, interactive=False, elem_id="take-lyrics")
    files = signed(gr.File(label="Downloads", file_count="multiple", interactive=False, elem_id="take-files"))
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
        cancel_take = gr.Button("Cancel this take only", elem_id="take-cancel", variant="stop", visible=False)
    note = gr.Markdown(elem_id="take-note")
    undo_id = gr.Textbox(visible=False)
    shown = gr.Textbox(visible=False)
    followed = gr.Textbox(visible=False)
    picked_before = gr.Textbox(visible=False)
    started = gr.Textbox(visible=False)
    with gr.Accordion("Full record", open=False):
        record = gr.Markdown(elem_id="take-record")
    with gr.Accordion("A/B: compare two takes at the same moment", open=False, elem_id="ab") as ab:
        with gr.Row():
            ab_a = gr.Dropdown(label="A", choices=[], elem_id="ab-pick-a")
            ab_b = gr.Dropdown(label="B", choices=[], elem_id="ab-pick-b")
        ab_players = gr.HTML(elem_id="ab-players")
    return TakesUI(listing, sort, refresh, audio, lyric_lines, waveform, lyrics_view, files, record, name, rename, star,
                   delete, undo, retry, use_settings, use_reference, use_edit, cancel_take, note, undo_id, shown, actions,
                   ab, ab_a, ab_b, ab_players, delete_cancelled, followed, picked_before, started, resing)
