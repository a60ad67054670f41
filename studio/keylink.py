"""`/?key=<token>` links (`studio token`): asked, never silent, and the browser's own key kept.

Opening such a link in a browser that already has its own owner key used to swap the stored key
without a word: the browser's sessions vanished from its list and its next songs landed in the
link-maker's account. Now a browser that has a key of its own is asked; switching keeps the old key in
the browser (`previous`), one click away ("Switch back"). A browser with no key yet simply takes the
handed one (there is nothing to lose). Either way `?key=` is removed from the address bar, so it is not
bookmarked, shared or left in the history by accident.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

PROMPT = ("**This link carries another owner key.** Using it shows that key's sessions here, and your next "
          "songs go to it (whoever made the link can read them). Your own key stays in this browser: "
          "*Switch back* returns to it.")
STRIP = ("() => { const u = new URL(window.location.href); if (u.searchParams.has('key')) { "
         "u.searchParams.delete('key'); window.history.replaceState(null, '', u.toString()); } }")


@dataclass
class KeyLink:
    group: Any
    accept: Any
    keep: Any
    back: Any
    pending: Any
    previous: Any


def build(secret: str) -> KeyLink:
    """The prompt (hidden until a link asks) and the switch-back button; call inside the Blocks."""
    previous = gr.BrowserState("", storage_key="diffrhythm-studio-previous-owner", secret=secret)
    pending = gr.State("")
    with gr.Group(visible=False, elem_id="key-prompt") as group:
        gr.Markdown(PROMPT)
        with gr.Row():
            accept = gr.Button("Use the link's key", elem_id="key-accept", size="sm")
            keep = gr.Button("Keep mine", elem_id="key-keep", size="sm", variant="primary")
    back = gr.Button("Switch back to my previous key", visible=False, elem_id="key-back", size="sm")
    return KeyLink(group, accept, keep, back, pending, previous)


def wire(demo: gr.Blocks, k: KeyLink, page: Any, handlers: Any, identity: Any) -> None:
    owner = page.owner
    redraw = [*page.session_outputs(), owner, k.previous, k.group, k.back]

    def ask(current: Any, previous: Any, request: gr.Request) -> dict:
        handed = dict(request.query_params).get("key") if request is not None else None
        asked = (handed is not None and identity.owner_of(handed) is not None
                 and identity.owner_of(current) is not None and identity.owner_of(handed) != identity.owner_of(current))
        return {k.group: gr.Group(visible=asked), k.pending: handed if asked else "",
                k.back: gr.Button(visible=identity.owner_of(previous) is not None)}

    def switch(to: Any, current: Any) -> dict:
        """Make `to` this browser's key and keep `current` as the one to switch back to."""
        if identity.owner_of(to) is None:
            return {k.group: gr.Group(visible=False)}
        out = handlers.sessions.new_session(to)  # a blank page and `to`'s session list
        out.update({owner: to, k.previous: current, k.group: gr.Group(visible=False),
                    k.back: gr.Button(visible=identity.owner_of(current) is not None)})
        return out

    demo.load(ask, [owner, k.previous], [k.group, k.pending, k.back], show_progress="hidden",
                api_visibility="private").then(None, js=STRIP)
    k.accept.click(switch, [k.pending, owner], redraw, show_progress="hidden", api_visibility="private")
    k.keep.click(lambda: {k.group: gr.Group(visible=False)}, None, [k.group], show_progress="hidden",
                 api_visibility="private")
    k.back.click(switch, [k.previous, owner], redraw, show_progress="hidden", api_visibility="private")
