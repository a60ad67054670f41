"""UI handlers that need no model: examples, the timing helper, the lyric report, style-source switching,
the form <-> request mapping and edit ranges.

What this pins: the dict updates the page receives (which component gets which value), built on the
real page layout (`build_page`, not launched).
"""

from __future__ import annotations

import re
from pathlib import Path

import gradio as gr
import pytest

from studio.app import build_page
from studio.config import PathRefused, StudioConfig
from studio.forms import ComposeForm, FormError, parse_ranges
from studio.handlers import Handlers
from studio.services import Services
from studio.store import Store
from studio.ui.compose import lyric_examples


@pytest.fixture
def h(tmp_path: Path) -> Handlers:
    # The test model's own phone vocabulary (`--model test`): the lyric helpers run everywhere, with no
    # model files and no ../shared.
    svc = Services(Store(tmp_path / "data"), StudioConfig(tmp_path / "data", test_model=True))
    return Handlers(svc, build_page(svc)[1])


def test_examples_fill_the_editor_or_the_timing_helper(h: Handlers) -> None:
    examples = lyric_examples()
    lrc = next(name for name, path in examples.items() if path.endswith(".lrc"))
    plain = next(name for name, path in examples.items() if path.endswith(".txt"))
    out = h.compose.load_example(lrc)
    assert out[h.page.compose.lyrics].lstrip().startswith("[") and out[h.page.compose.instrumental] is False
    out = h.compose.load_example(plain)
    assert "[Verse]" in out[h.page.compose.plain] or "[Chorus]" in out[h.page.compose.plain]
    assert h.compose.load_example("no such example") == {}


def test_example_names_say_what_a_musician_picks() -> None:
    """The walk saw 'qingchen' and 'qiuye' (pinyin file names): each example now reads as a title with its
    language and whether it is timed or goes to the timing helper."""
    names = list(lyric_examples())
    assert len(names) == 4
    for name in names:
        assert re.fullmatch(r"[^()]+ \((English|Mandarin), (timed|plain, for the timing helper)\)", name), name
    assert not any(word in " ".join(names).lower() for word in ("qingchen", "qiuye"))


def test_timing_helper_writes_lrc_into_the_editor(h: Handlers) -> None:
    out = h.compose.time_lyrics("[Verse]\nwe folded paper into wings\nand ran along the railway track\n", 95, None, None)
    lrc = out.get(h.page.compose.lyrics)
    assert lrc is not None, out  # the test model brings its own vocabulary: the helper always runs
    assert lrc.count("[00:") >= 2
    assert "Paste plain lyrics" in h.compose.time_lyrics("  ", 95, None, None)[h.page.compose.timing_note]


def test_lyric_report_instrumental_and_errors_are_shown_not_raised(h: Handlers) -> None:
    assert "Instrumental" in h.compose.lyric_report("", 95, False)
    assert "Instrumental" in h.compose.lyric_report("[00:01.00]words", 95, True)
    html = h.compose.lyric_report("[00:01.00]hello there\n[00:04.00]\n", 95, False)
    assert "lyric-report" in html and "hello there" in html and "sung" in html, html  # the line's row
    broken = h.compose.lyric_report("[00:01.00]hello\n[99:99.99]late\n", 95, False)
    assert "lyric-report" in broken and broken != html, broken  # the reason, shown instead of raised


def test_lyric_report_refuses_oversized_text_before_laying_it_out(h: Handlers) -> None:
    import time

    started = time.perf_counter()
    out = h.compose.lyric_report("[00:01.00]" + "la " * 100_000, 95, False)  # 300,000 characters
    assert "the limit is 200,000" in out and time.perf_counter() - started < 2
    assert "<script>" not in h.compose.lyric_report("<script>x</script>", "95<script>", False)


def test_choosing_a_style_source_clears_the_others(h: Handlers) -> None:
    s = h.page.style
    out = h.style.style_source("audio")
    assert out[s.text] == "" and out[s.saved] is None
    assert out[s.audio_group].visible is True and out[s.text_group].visible is False
    out = h.style.style_source("text")
    assert out[s.audio] is None and out[s.audio_path] == "" and out[s.saved] is None
    assert isinstance(out[s.text], type(gr.skip()))  # the prompt itself is kept


def test_form_to_request_and_refusals(h: Handlers, tmp_path: Path) -> None:
    svc = h.svc
    req = ComposeForm(lyrics="[00:01.00]x\n", style_text="jazz", duration=120, random_seed=False, seed=9,
                      variations=2, formats=["flac"]).to_request(svc.store, svc.config)
    assert (req.duration, req.seed, req.variations, req.style.text) == (120.0, 9, 2, "jazz")
    assert ComposeForm(instrumental=True, lyrics="[00:01.00]x", style_text="a").to_request(
        svc.store, svc.config).lyrics == ""
    with pytest.raises(FormError, match="Describe the style"):
        ComposeForm(style_text=" ").to_request(svc.store, svc.config)
    with pytest.raises(PathRefused):
        ComposeForm(style_source="audio", style_audio=str(tmp_path / "x.wav")).to_request(svc.store, svc.config)
    with pytest.raises(FormError, match="Pick the take"):
        ComposeForm(style_text="a", edit_mode="edit").to_request(svc.store, svc.config)
    # Unknown keys from an older studio are ignored; the form round-trips through session inputs.
    form = ComposeForm.from_dict({"lyrics": "la", "gone_field": 1, "formats": None})
    assert form.formats == ["wav"] and ComposeForm.from_dict(form.session_inputs()).lyrics == "la"


def test_edit_ranges() -> None:
    assert parse_ranges("10-20, 1:05-1:20; 80-end\nstart-5") == [(10, 20), (65, 80), (80, -1), (-1, 5)]
    assert parse_ranges("1:05.5 to 1:10") == [(65.5, 70)]
    for bad in ("", "soon", "10-", "a-b"):
        with pytest.raises(FormError):
            parse_ranges(bad)


def test_use_these_settings_loads_the_takes_request_and_actual_seed(h: Handlers) -> None:
    store = h.svc.store
    token = h.svc.identity.new_token()
    s = store.create_session("s", owner=h.svc.identity.owner_of(token),
                             inputs=ComposeForm(style_text="old").session_inputs())
    t = store.add_take(s.id, {"lyrics": "[00:01.00]la\n", "style": {"text": "bossa nova"}, "duration": 150,
                              "steps": 40, "cfg": 3.5, "formats": ["wav", "ogg"]}, seed=4242)
    assert h.page.takes.note in h.takes.use_settings(t.id, s.id, h.svc.identity.new_token())  # not this owner's
    assert "Pick a take" in h.takes.use_settings(t.id, s.id, h.svc.identity.new_token())[h.page.takes.note]
    out = h.takes.use_settings(t.id, s.id, token)
    g, st = h.page.gen, h.page.style
    # The seed box (a text box, editable now that the seed is fixed) holds the take's actual seed.
    assert out[g.seed]["value"] == "4242" and out[g.seed]["interactive"] is True
    assert out[g.random_seed] is False and out[g.duration] == 150
    assert out[g.steps] == 40 and out[g.cfg] == 3.5 and out[st.text] == "bossa nova"
    assert out[h.page.compose.lyrics] == "[00:01.00]la\n" and out[g.formats] == ["wav", "ogg"]


def test_after_an_edit_a_reload_starts_a_new_song_with_the_source_takes_offered(h: Handlers) -> None:
    """The walk saw: Edit/Continue used, page reloaded -> "Continue a take" with an empty source list, and
    Generate failed with a bare "Error" (a value outside the choices). A session reopens on "New song", the
    source-take list is filled on load, and "Edit / continue this take" leaves the seed random."""
    store = h.svc.store
    token = h.svc.identity.new_token()
    edited = ComposeForm(style_text="x", edit_mode="continue", edit_take="abc", continue_from=10.0)
    s = store.create_session("s", owner=h.svc.identity.owner_of(token), inputs=edited.session_inputs())
    t = store.add_take(s.id, {"lyrics": "", "style": {"text": "x"}, "duration": 95}, seed=7)
    store.update_take(t.id, status="done")
    g = h.page.gen
    for draft in ({}, {"session": s.id, "form": edited.to_dict()}):
        out = h.sessions.on_load(token, s.id, draft, None)
        mode = out[g.edit_mode]
        assert (mode.get("value") if isinstance(mode, dict) else mode) == "none", draft
        source = out[g.edit_take]
        assert [v for _, v in source.choices] == [t.id], draft
    assert h.takes.use_edit(t.id, s.id, token)[g.random_seed] is True


def test_the_first_load_leaves_fields_typed_before_it_and_ignores_odd_names(h: Handlers) -> None:
    """The page's first load restores the session and an earlier draft, but not over fields the browser
    says were typed on this page before the load went out (assets/ui/drafts.js); the names come from the
    browser, so names that are no field, or not text, change nothing and fail nothing."""
    store = h.svc.store
    token = h.svc.identity.new_token()
    s = store.create_session("s", owner=h.svc.identity.owner_of(token),
                             inputs=ComposeForm(title="Saved", lyrics="[00:01.00]saved\n", style_text="saved").session_inputs())
    c = h.page.compose
    draft = {"session": s.id, "form": {"lyrics": "[00:01.00]unsent\n"}, "typed": ["title", 5, ["x"], None, "nope"]}
    out = h.sessions.on_load(token, s.id, draft, None)
    assert c.title not in out  # typed here: the page keeps it
    assert out[c.lyrics] == "[00:01.00]unsent\n"  # the earlier draft comes back
    assert out[h.page.style.text] == "saved"  # the session's own input
    out = h.sessions.on_load(token, s.id, {"typed": "title"}, None)  # not a list: nothing is left out
    assert out[c.title]["value"] == "Saved"


def test_a_stale_take_or_session_id_reads_as_no_selection() -> None:
    """A redraw and a follow of the take list can cross (a session or owner switch while a take renders),
    leaving the browser a take id the list no longer holds; the next event failed with a bare "Error".
    On the take and session lists such an id is read as nothing picked; other radios still refuse."""
    import gradio as gr

    import studio.ui.takes  # noqa: F401 - installs the reading

    takes = gr.Radio(choices=[("Take 1", "abc")], elem_id="takes")
    assert takes.preprocess("abc") == "abc" and takes.preprocess("gone") is None and takes.preprocess(None) is None
    assert gr.Radio(choices=[], elem_id="sessions").preprocess("old-session") is None
    with pytest.raises(gr.Error, match="not in the list of choices"):
        gr.Radio(choices=["newest first"], elem_id="takes-sort").preprocess("made up")


def test_after_a_follow_the_finished_take_is_shown_unless_the_musician_picked_one(h: Handlers) -> None:
    """A follow's last word used to select the take it finished, and landed after a click made as the takes
    settled: the take the musician had opened was swapped under their Delete. Now the step after the follow
    decides against what the page has picked by then."""
    store = h.svc.store
    token = h.svc.identity.new_token()
    s = store.create_session("s", owner=h.svc.identity.owner_of(token))
    older, cancelled, finished = (store.add_take(s.id, {"lyrics": "", "duration": 95}, seed=i) for i in (1, 2, 3))
    for take, status in ((older, "done"), (cancelled, "cancelled"), (finished, "done")):
        store.update_take(take.id, status=status)
    t = h.page.takes
    followed = f"{cancelled.id} {finished.id}"  # the follow's takes, in the order they were made

    def after(picked: str | None, before: str | None, session_id: str = s.id, owner: str = token,
              ids: str = followed) -> tuple[str | None, bool]:
        """(the value the list is sent, or "-" when the browser keeps its own; whether the detail is redrawn)"""
        out = h.takes.show_finished(picked, ids, before, "newest first", session_id, owner)
        sent = out[t.listing]._constructor_args[0]  # what the update sends: the arguments it was made with
        assert [v for _, v in sent["choices"]] in ([finished.id, cancelled.id, older.id], [])
        return sent.get("value", "-"), t.audio in out

    assert after(None, None) == (finished.id, False)  # nothing picked: the finished take (its change shows it)
    assert after(older.id, older.id) == (finished.id, False)  # the pick it began with: the finished take
    assert after(cancelled.id, older.id) == ("-", False)  # picked while it ran: the musician's pick stays
    # The followed take picked as it began (Retry selects the new take): drawn again, now finished.
    assert after(finished.id, finished.id) == ("-", True)
    assert after(cancelled.id, cancelled.id, ids=cancelled.id) == ("-", True)  # nothing finished: the pick, ended
    assert after(None, None, ids=cancelled.id) == ("-", False)
    # A follow of a session the page has left, or another owner's page: nothing of it is selected.
    other = store.create_session("other", owner=h.svc.identity.owner_of(token))
    assert after(None, None, session_id=other.id) == ("-", False)
    assert after(None, None, owner=h.svc.identity.new_token()) == ("-", False)
    # A follow that followed nothing (the first load's watch of a blank page, a refused Generate) redraws
    # nothing: its inputs are as old as the follow, and a list redrawn from them emptied a session opened since.
    assert h.takes.show_finished(None, "", None, "newest first", None, token) == {t.note: gr.skip()}
    assert h.takes.show_finished(finished.id, "", finished.id, "newest first", s.id, token) == {t.note: gr.skip()}
    assert list(h.generate.watch(None, token)) == [{h.page.gen.progress: gr.skip(), t.followed: ""}]


def test_a_take_already_drawn_is_not_drawn_again_when_its_selection_lands(h: Handlers) -> None:
    """Undo, star and rename draw the take and select it; the selection's change event drew it again,
    late on a loaded machine, wiping a name being typed (and the handler's note)."""
    store = h.svc.store
    token = h.svc.identity.new_token()
    s = store.create_session("s", owner=h.svc.identity.owner_of(token))
    take = store.add_take(s.id, {"lyrics": "", "duration": 95}, seed=1)
    store.update_take(take.id, status="done")
    t = h.page.takes
    drawn = h.takes.star(take.id, s.id, token)
    assert drawn[t.shown] == take.id and drawn[t.star] == "★ Starred"
    assert h.takes.show_take(take.id, s.id, token, None, drawn[t.shown]) == {t.note: gr.skip()}
    picked = h.takes.show_take(take.id, s.id, token, None, "another-take")  # picked in the list: drawn
    assert picked[t.shown] == take.id and picked[t.name] == ""
    assert h.takes.show_take(take.id, s.id, h.svc.identity.new_token(), None, "")[t.shown] == ""  # not theirs
