"""Layout only: each module builds one section of the page and returns its components in a dataclass.

Wiring lives in `studio.events`, behaviour in `studio.handlers*`.
"""
