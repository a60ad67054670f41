"""The studio app: composes the page sections, wires them to the handlers and serves it.

    svc = Services(Store(data_dir), StudioConfig(data_dir), engine=engine, model_status=status)
    demo = build_app(svc)
    launch(demo, svc, host="127.0.0.1", port=7860)
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from studio import api, events, files, gradio_state, idle, keylink, live, mcp_tools, uploads
from studio.config import UI_ASSETS
from studio.handlers import Handlers
from studio.page import Page
from studio.services import Services
from studio.ui import compose, generate, history, style, takes

logger = logging.getLogger(__name__)

CSS_FILE = UI_ASSETS / "studio.css"
JS_FILES = sorted(UI_ASSETS.glob("*.js"))  # the page's own behaviours, one file each (assets/ui/*.js)


def build_app(svc: Services) -> gr.Blocks:
    return build_page(svc)[0]


def build_page(svc: Services) -> tuple[gr.Blocks, Page]:
    """The app and its page's components (what the handlers are built on)."""
    config = svc.config
    with gr.Blocks(title="DiffRhythm Studio",
                   delete_cache=(config.browser_copies_every_s, config.browser_copies_max_age_s)) as demo:
        # A fixed secret (derived from the data folder's key), so what browsers stored survives a restart.
        secret = svc.identity.browser_state_secret
        owner = gr.BrowserState("", storage_key="diffrhythm-studio-owner", secret=secret)
        session = gr.BrowserState("", storage_key="diffrhythm-studio-session", secret=secret)
        draft = gr.BrowserState({}, storage_key="diffrhythm-studio-draft", secret=secret)
        token = gr.State("")
        with gr.Row(elem_id="header"):
            gr.Markdown("# ♪ DiffRhythm Studio\nWrite lyrics, pick a style, make songs — every take is kept.",
                        elem_id="brand")
        banner = gr.Markdown(svc.model_status.banner_markdown(), elem_id="model-banner")
        key_link = keylink.build(secret)
        # While the workers load (or model files download), the banner follows their progress.
        banner_timer = gr.Timer(2.0, active=bool(svc.model_status.loading))
        fetch = gr.Button("Download the model files", visible=False, elem_id="fetch-models", size="sm")
        shared = history.build_shared()
        with gr.Row(equal_height=False):
            with gr.Column(scale=6, elem_id="compose-col"):
                with gr.Group(elem_id="compose"):
                    comp = compose.build()
                with gr.Group(elem_id="style"):
                    sty = style.build()
                gen = generate.build()
            with gr.Column(scale=5, elem_id="takes-col"):
                tks = takes.build()
                with gr.Accordion("Sessions", open=True, elem_id="history"):
                    hist = history.build()
        editable = [gen.generate, gen.cancel, sty.save, sty.save_name, hist.share, hist.revoke, hist.new,
                    tks.use_settings, tks.use_reference, tks.use_edit,
                    tks.delete_cancelled]  # Cancel this take: take_detail
        page = Page(banner, shared, comp, sty, gen, tks, hist, owner, session, token, editable)
        handlers = Handlers(svc, page)
        api.register(svc)  # first, so the stable endpoints get their plain names
        mcp_tools.register(svc)  # the agents' tools: public endpoints too, served over MCP with --mcp
        follows = events.wire(page, handlers, svc.config.follow_concurrency)
        def banner_state() -> dict:
            st = svc.model_status
            return {banner: st.banner_markdown(), banner_timer: gr.Timer(active=bool(st.loading)),
                    fetch: gr.Button(visible=bool(st.can_fetch and not st.ready and not st.loading))}

        def start_fetch() -> dict:
            if svc.on_fetch is not None:
                svc.on_fetch()
            return {**banner_state(), banner_timer: gr.Timer(active=True)}

        banner_timer.tick(banner_state, outputs=[banner, banner_timer, fetch], show_progress="hidden",
                          api_visibility="private")
        fetch.click(start_fetch, outputs=[banner, banner_timer, fetch], api_visibility="private")
        demo.load(banner_state, outputs=[banner, banner_timer, fetch], show_progress="hidden",
                  api_visibility="private")
        _keep_drafts(page, draft)
        load = demo.load(handlers.sessions.on_load, [owner, session, draft],
                         [*page.session_outputs(), owner, token, banner, shared.copy], js=LOAD_JS,
                         show_progress="hidden", api_visibility="private")
        keylink.wire(demo, key_link, page, handlers, svc.identity)
        watch = load.then(handlers.generate.watch, [session, owner, tks.listing], page.follow_outputs(),
                          concurrency_limit=svc.config.follow_concurrency, concurrency_id="follow",
                          show_progress="hidden", api_visibility="private")
        watch.then(**events.finished_step(page, handlers))
        events.leave_follows([hist.sessions.input, hist.new.click, shared.copy.click, key_link.accept.click,
                              key_link.back.click], [*follows, watch])
    return demo, page


DRAFT_FIELDS = ("title", "lyrics", "instrumental", "style_source", "style_text", "duration", "steps", "cfg",
                "seed", "random_seed", "variations", "formats")
# What the page's first load sends as the draft, and what each change of a field writes: both in
# assets/ui/drafts.js, which explains why a draft names the page load that wrote it.
LOAD_JS = "(owner, session, draft) => window.drsFirstLoad(owner, session, draft)"


def _keep_drafts(page: Page, draft: gr.BrowserState) -> None:
    """What is typed is kept in the browser as it changes (no server round trip), so a reload before
    Generate loses nothing; `on_load` puts it back when it belongs to the session being opened."""
    fields = page.form_fields()
    names = ", ".join(f"'{n}'" for n in DRAFT_FIELDS)
    inputs = [draft, page.session, *(fields[n] for n in DRAFT_FIELDS)]
    for name in ("title", "lyrics", "style_text", "duration", "steps", "cfg", "seed", "variations"):
        js = f"(draft, session, ...v) => window.drsDraft('{name}', [{names}], draft, session, v)"
        fields[name].change(None, inputs, draft, js=js, show_progress="hidden", api_visibility="private")


def launch(demo: gr.Blocks, svc: Services, *, host: str = "127.0.0.1", port: int | None = 7860,
           block: bool = True, mcp: bool = False, **kwargs: Any) -> tuple[Any, str, str]:
    """Queue sized for one card and serve only the data directory and the app's own assets; with `mcp`,
    also the agents' tools over MCP (Streamable HTTP at /gradio_api/mcp/, `studio.mcp_tools`)."""
    demo.queue(max_size=svc.config.queue_max_size, default_concurrency_limit=8)
    launched = demo.launch(
        server_name=host,
        server_port=port,
        prevent_thread_lock=True,  # the live-audio route goes onto the app first (Gradio makes it here)
        allowed_paths=svc.config.served_paths(),
        blocked_paths=svc.config.blocked_paths(),
        max_file_size=f"{svc.config.max_upload_mb}mb",
        css_paths=[CSS_FILE] if CSS_FILE.is_file() else None,
        head="".join(f"<script>{p.read_text(encoding='utf-8')}</script>" for p in JS_FILES) or None,
        theme=gr.themes.Soft(primary_hue="orange", neutral_hue="slate"),
        footer_links=["api"],
        show_error=True,
        quiet=True,
        mcp_server=mcp,  # False, not None: GRADIO_MCP_SERVER in the environment does not open it
        **kwargs,
    )
    if mcp:
        mcp_tools.expose_tools(demo)
    live.mount(launched[0], svc)
    files.mount(launched[0], svc)
    gradio_state.start_pruning(demo)
    uploads.start_sweeping(svc)
    idle.calm_queue(demo)
    svc.state_holder = demo.state_holder
    if block:
        demo.block_thread()
    return launched
