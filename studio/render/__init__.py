"""`studio render`: headless batch rendering on the engine (see `studio/cli/render.py`).

| module | role |
|---|---|
| `batch` | one run: validate, decide what `--resume` skips, start the workers, render, the manifest |
| `single` | the one-song form (`--lyrics ... -o song.wav`): a one-line batch |
| `jobs` | the JSONL jobs file: parsing, every problem named (line, field), duplicate ids |
| `identity` | what a job's output depends on, hashed, so `--resume` can trust what it skips |
| `outdir` | per-id folders committed by rename, render.json / failure.json, the run manifest |
| `runner` | the batch loop over the engine, Ctrl-C handling |
| `pick` | `best_of`: the variation that sang its lyrics best |
| `progress` | progress bars (or plain lines) on stderr |
| `recorder` | `--session`: the renders mirrored into the studio's store |
"""
