"""The studio: Gradio app, `studio` command line and the SQLite store."""
