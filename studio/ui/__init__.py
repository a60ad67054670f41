"""Layout only: each module builds one section of the page and returns its components in a dataclass.

Wiring lives in `studio.events`, behaviour in `studio.handlers*`.

| module | section |
|---|---|
| `compose` | title, lyrics with the live per-line report, timing helper, instrumental, examples |
| `style` | a text prompt, a reference recording or a saved style |
| `generate` | duration, Advanced settings, edit/continue a take, Generate/Cancel, progress |
| `takes` | the session's takes and one take in full |
| `resing` | "Re-sing missed lines": what the lyrics check heard, a tick per line |
| `history` | sessions: new, search, reopen; the share link; the shared view's banner |
"""
