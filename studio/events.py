"""All event wiring in one place, grouped by section; behaviour lives in the handlers."""

from __future__ import annotations

from typing import Any

import gradio as gr

from studio import seedbox
from studio.handlers import Handlers
from studio.page import Page

# UI-only events stay out of the API page (`api_visibility`); the stable API lives in studio.api.
PRIVATE = {"api_visibility": "private"}


def wire(page: Page, h: Handlers, follow_limit: int) -> list[Any]:
    """Wire the page; returns the events that follow a session's takes (see `leave_follows`)."""
    p, c, s, g, t, hi = page, page.compose, page.style, page.gen, page.takes, page.history

    # ---------------------------------------------------------------- compose
    report_inputs = [c.lyrics, g.duration, c.instrumental]
    for trigger in (c.lyrics.change, g.duration.release, c.instrumental.change):
        trigger(h.compose.lyric_report, report_inputs, c.report, show_progress="hidden", trigger_mode="always_last",
                **PRIVATE)
    c.time_it.click(h.compose.time_lyrics, [c.plain, g.duration, c.tempo, c.intro], [c.lyrics, c.timing_note], **PRIVATE)
    c.example.change(h.compose.load_example, c.example, [c.lyrics, c.plain, c.timing_note, c.instrumental], **PRIVATE)

    # ---------------------------------------------------------------- style
    style_outputs = [s.text_group, s.audio_group, s.saved_group, s.text, s.audio, s.audio_path, s.window_note,
                     s.saved]
    s.source.change(h.style.style_source, s.source, style_outputs, **PRIVATE)
    s.chips.click(lambda sample: sample[0], s.chips, s.text, **PRIVATE)
    s.audio.upload(h.style.style_audio, [s.audio, p.owner], [s.audio, s.audio_path, s.window_note], **PRIVATE)
    s.audio.stop_recording(h.style.style_audio, [s.audio, p.owner], [s.audio, s.audio_path, s.window_note], **PRIVATE)
    s.save.click(h.style.save_style, [s.save_name, s.source, s.text, s.audio_path, p.owner], [s.save_note, s.saved],
                 **PRIVATE)

    # ---------------------------------------------------------------- generate
    gen_outputs = p.follow_outputs()
    g.random_seed.input(seedbox.toggled, [g.random_seed, g.seed], g.seed, show_progress="hidden", **PRIVATE)
    # After a follow: the order the musician picked is put back, and the take it finished is shown.
    finished = finished_step(page, h)
    gen_follow = g.generate.click(h.generate.generate, p.form_inputs(), gen_outputs, concurrency_limit=follow_limit,
                                  concurrency_id="follow", show_progress="minimal", **PRIVATE)
    generated = gen_follow.then(**finished)
    g.cancel.click(h.generate.cancel, [p.session, p.owner], g.message, queue=False, **PRIVATE)

    # ---------------------------------------------------------------- takes
    take_out = p.take_outputs()
    t.listing.change(h.takes.show_take, [t.listing, p.session, p.owner, p.token, t.shown], take_out, **PRIVATE)
    t.refresh.click(h.takes.resort, [t.sort, p.session, p.owner], [t.listing, g.edit_take], **PRIVATE)
    t.sort.change(h.takes.resort, [t.sort, p.session, p.owner], [t.listing, g.edit_take], **PRIVATE)
    # Each redraws the list newest first; the order the musician picked is then put back.
    resort = dict(fn=h.takes.resort, inputs=[t.sort, p.session, p.owner], outputs=[t.listing, g.edit_take],
                  **PRIVATE)
    t.rename.click(h.takes.rename, [t.listing, p.session, t.name, p.owner], [t.listing, g.edit_take, *take_out],
                   **PRIVATE).then(**resort)
    t.star.click(h.takes.star, [t.listing, p.session, p.owner], [t.listing, g.edit_take, *take_out], **PRIVATE).then(**resort)
    t.delete.click(h.takes.delete, [t.listing, p.session, p.owner], [t.listing, g.edit_take, *take_out],
                   **PRIVATE).then(**resort)
    t.delete_cancelled.click(h.takes.delete_cancelled,
                             [t.listing, p.session, p.owner], [t.listing, g.edit_take, *take_out],
                             **PRIVATE).then(**resort)
    t.undo.click(h.takes.undo_delete, [t.undo_id, p.session, p.owner], [t.listing, g.edit_take, *take_out],
                 **PRIVATE).then(**resort)
    retry_follow = t.retry.click(h.takes.retry, [t.listing, p.session, p.owner],
                                 [t.listing, g.edit_take, t.note, t.started], **PRIVATE).then(
        h.generate.watch, [p.session, p.owner, t.listing, t.started], gen_outputs, concurrency_limit=follow_limit,
        concurrency_id="follow", **PRIVATE)
    retry_follow.then(**finished)
    form_out = [*p.form_fields().values(), s.text_group, s.audio_group, s.saved_group, s.audio, t.note]
    t.use_settings.click(h.takes.use_settings, [t.listing, p.session, p.owner], form_out, **PRIVATE)
    t.use_reference.click(h.takes.use_reference, [t.listing, p.owner], [*style_outputs, s.source, t.note], **PRIVATE)
    t.cancel_take.click(h.generate.cancel_take, [t.listing, p.session, p.owner], t.note, queue=False, **PRIVATE)
    t.use_edit.click(h.takes.use_edit, [t.listing, p.session, p.owner], [*form_out, t.listing], **PRIVATE)

    follows = [gen_follow, retry_follow, *wire_heard(page, h, follow_limit, gen_outputs, finished, generated)]

    t.ab.expand(h.takes.ab_choices, [p.session, p.owner, p.token], [t.ab_a, t.ab_b], **PRIVATE)
    for pick in (t.ab_a, t.ab_b):
        pick.change(h.takes.ab_players, [t.ab_a, t.ab_b, p.owner, p.token], t.ab_players, **PRIVATE)

    # ---------------------------------------------------------------- sessions and sharing
    session_out = p.session_outputs()
    # Opening one of my sessions from a shared view leaves it: `?s=` goes from the address bar too.
    hi.sessions.input(h.sessions.open_session, [hi.sessions, p.owner, p.token], [*session_out, p.token], **PRIVATE).then(
        None, js="() => window.history.replaceState(null, '', window.location.pathname)", **PRIVATE)
    hi.new.click(h.sessions.new_session, p.owner, session_out, **PRIVATE)
    hi.query.submit(h.sessions.search, [hi.query, p.owner], hi.sessions, **PRIVATE)
    hi.query.change(h.sessions.search, [hi.query, p.owner], hi.sessions, trigger_mode="always_last",
                    show_progress="hidden", **PRIVATE)
    hi.share.click(h.sessions.share, [p.session, p.owner], [hi.link, hi.share_note], **PRIVATE)
    hi.revoke.click(h.sessions.revoke, [p.session, p.owner], [hi.link, hi.share_note], **PRIVATE)
    # After copying, drop `?s=` from the address bar so a refresh opens the copy, not the shared view.
    p.shared.copy.click(h.sessions.copy_shared, [p.token, p.owner], [*session_out, p.token], **PRIVATE).then(
        None, js="() => window.history.replaceState(null, '', window.location.pathname)", **PRIVATE)
    return follows


def finished_step(page: Page, h: Handlers) -> dict:
    """What runs after every follow (Generate, the watch after a reload, Retry, Re-sing): the list in the
    musician's order, and the take the follow finished shown unless they picked one meanwhile."""
    t = page.takes
    return dict(fn=h.takes.show_finished, inputs=[t.listing, t.followed, t.picked_before, t.sort, page.session, page.owner],
                outputs=[t.listing, page.gen.edit_take, *page.take_outputs()], **PRIVATE)


def leave_follows(switches: list[Any], follows: list[Any]) -> None:
    """Whatever puts another session (or owner) on the page stops the page's follows of the one it left.

    A follow (Generate, the watch after a reload, Retry, Re-sing, the lyrics check's wait) streams *its*
    session's take list until the takes end; left running after a switch it drew the old session's takes
    over the new one, and the next event sent a take id the new list does not hold (Gradio refuses it:
    "Value ... is not in the list of choices"). The takes themselves go on rendering: only the page's
    following stops, as when the page is closed."""
    gr.on(switches, None, cancels=follows, **PRIVATE)


def wire_heard(page: Page, h: Handlers, follow_limit: int, gen_outputs: list, finished: dict,
               generated: Any) -> list[Any]:
    """The lyrics check on the page: marks and the re-sing panel follow the shown take, and arrive after it
    is playable (heard_wait); "Re-sing ticked lines" starts an edit take and follows it like Generate.
    Returns the events that follow takes."""
    p, t, r = page, page.takes, page.takes.resing
    heard_in = [t.listing, p.session, p.owner, p.token]
    heard_out = [t.lyric_lines, r.group, r.summary, r.lines, r.note]
    # It may wait for a check still to come: its own pool, so one page waiting never holds up another's.
    wait = dict(fn=h.heard.heard_wait, inputs=heard_in, outputs=heard_out, show_progress="hidden",
                concurrency_limit=follow_limit, concurrency_id="heard", **PRIVATE)
    waits = [t.listing.change(trigger_mode="always_last", **wait), generated.then(**wait)]
    resing_follow = r.go.click(h.heard.resing_lines, [t.listing, r.lines, p.session, p.owner], [r.note, t.started],
                               **PRIVATE).then(
        h.generate.watch, [p.session, p.owner, t.listing, t.started], gen_outputs, concurrency_limit=follow_limit,
        concurrency_id="follow", **PRIVATE)
    waits.append(resing_follow.then(**finished).then(**wait))
    return [resing_follow, *waits]
