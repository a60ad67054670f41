"""The studio: the Gradio page, the HTTP API, the `studio` command line and the store.

| module | role |
|---|---|
| `app`, `page`, `ui/`, `events` | the page: sections' components, one place wiring events to handlers |
| `handlers/` | what page events do: one handler object per page section (compose, style, generate, takes, sessions, heard) |
| `forms`, `songs` | the compose form <-> an engine request; the one path Generate, Retry and the API take |
| `access`, `identity`, `files`, `page_files`, `download_names` | who may read or change what (page, API, files, live, shares); owner tokens (a key ring); signed file URLs, for the API and the page's players; what a download is called |
| `takes`, `progress` | the take runner (clicks -> engine jobs, events -> store); how an event shows as progress |
| `live`, `waveform`, `present` | hearing a take while it is made; the region editor's data; how things look |
| `api` | named API endpoints for `gradio_client` scripts |
| `mcp_tools`, `mcp_views` | the seven tools for agents (`studio serve --mcp`, docs/agents.md); a take as an agent reads it |
| `services`, `config` | what handlers call (store, runner, settings, model status); studio settings |
| `admission`, `idle`, `gradio_state` | fair shares per owner (queue, follow and stream slots); an idle studio sleeps; Gradio's per-session memory given back |
| `keylink`, `seedbox`, `uploads` | `/?key=` links, asked never silent; the seed box; unused uploads removed after a day |
| `store/` | SQLAlchemy store (SQLite / PostgreSQL): sessions, takes, leases, integrity, sharing |
| `render/` | `studio render`: headless batches, manifests, resumable output folders |
| `cli/` | the `studio` command: one module per group, and the options serve and render share |
| `fetcher`, `testmodel`, `testwhisper` | first-run model download; the self-contained tiny test model (and its Whisper) |
| `heard_view`, `handlers/heard`, `resing`, `lyrics_model`, `cli/heard` | the lyrics check: marks on the page, re-singing lines, which Whisper, `studio lyrics heard` |
"""
