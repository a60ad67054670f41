"""The DiffRhythm networks (and the lyrics check's Whisper) in plain torch, read like nanoGPT / gpt-fast.

| module | role |
|---|---|
| `config` | `DiTConfig`, the published checkpoints' presets (`DiTConfig.from_name`), `HALF_MODES` |
| `dit` | the DiT (LLaMA trunk, lyric and style conditioning); q/k/v and gate/up fused at load |
| `load` | `load_dit`: release `.pt` / safetensors, strict keys, the architecture from a JSON or the tensors |
| `checkpoints` | `CheckpointError` and the strict key/shape comparison every loader shares |
| `sampling` | the one flow-matching Euler + CFG sampler for every backbone (`start_song` / `step_song` / ...) |
| `compiled` | the DiT step under `torch.compile`, falling back to eager on any compile failure |
| `vae` | the Oobleck VAE and its windowed decode; `vae_checkpoint` reads its TorchScript file's tensors |
| `whisper` | Whisper for the lyrics check: the network, its log-mel front end, greedy decoding with the alignment heads kept |
"""
