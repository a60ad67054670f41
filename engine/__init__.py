"""Host side of the studio: lyrics, style, jobs, scheduling, progress and files.

Never imports gradio; talks to the device worker only through `engine.remote` and the worker's protocol.
"""
