"""`studio render`: headless batch rendering on the engine (see `studio/cli/render.py`).

    jobs.py      the JSONL jobs file: parsing, every problem named (line, field), duplicate ids
    identity.py  what a job's output depends on, hashed, so `--resume` can trust what it skips
    outdir.py    per-id folders committed by rename, render.json / failure.json, the run manifest
    progress.py  progress bars (or plain lines) on stderr
    recorder.py  `--session`: the renders mirrored into the studio's store
    runner.py    the batch loop over the engine, Ctrl-C handling
"""
