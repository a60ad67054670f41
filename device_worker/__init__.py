"""The device worker: the process that owns the card.

It holds the DiffRhythm model (DiT, sampler, Oobleck VAE, the MuQ-MuLan style model) and the backends
that run it (torch on CPU/CUDA/MPS, ttnn on a Tenstorrent p100a). It imports nothing from `engine` or
`studio` and runs on CPython 3.10-3.12, so it can live in the card's own environment.

| part | module | role |
|---|---|---|
| contract | `protocol` | op bytes, one msgspec Struct per message (`SongParams` is a song's settings), limits, version |
| | `wire` | frames: typed headers + raw tensor buffers, HMAC; bfloat16 <-> numpy bits |
| | `shapes` | rates, model lengths, sequence buckets, VAE windows (no torch: the engine reads it too) |
| | `controls` | the musician's numbers (steps, cfg, ...): default, range, label, once |
| | `config` | `WorkerConfig`: every flag of `python -m device_worker`; what `--precision auto` means |
| process | `worker` | `WorkerServer`: the ROUTER socket and IO thread around the core |
| | `core` | `WorkerCore`: admit jobs, run one unit (a step or a VAE window) at a time, emit events |
| | `scheduler` | which job's next unit runs (fifo / fair / ...) |
| | `__main__`, `devices` | `python -m device_worker`; what `--device auto` picks (CUDA, MPS, CPU) |
| | `lifecycle` | one worker per device (lock files), stale sockets, RSS |
| | `audio` | peak normalisation and int16 output, as upstream |
| model | `model/` | the networks in plain torch: config, DiT, VAE, Whisper, loading, the sampler, the compiled step |
| | `style/` | MuQ-MuLan (audio and text towers) and its loader |
| | `transcribe` | the lyrics check: Whisper loaded, windows heard, word times by DTW (also `python -m device_worker.transcribe`) |
| backends | `backends/` | `base` (the interface and the shared sampler driver), `torch_backend`, `ttnn/` |
"""

__version__ = "0.1.0"
