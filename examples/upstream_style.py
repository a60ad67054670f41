"""Upstream-style DiffRhythm calling code with the model on a device worker: `RemoteDiT` and `RemoteVae`.

Upstream's scripts (DiffRhythm `infer/infer.py`) hold a `CFM` whose `.transformer` is the DiT, and a VAE:

    latents, _ = cfm.sample(cond=cond, text=lrc_ids, duration=frames, style_prompt=style,
                            negative_style_prompt=negative_style, steps=32, cfg_strength=4.0, ...)
    audio = vae.decode(latents.transpose(1, 2))

With a device worker holding the weights, two objects change and the calling code does not:

    cfm.transformer = RemoteDiT(worker)  # a torch module; each transformer call is one FORWARD
    vae = RemoteVae(worker)              # .decode([B, 64, T]) -> [B, 2, T * 2048], window by window

`CFM` below is the part of upstream's CFM that those scripts touch (`.transformer`, and `.sample` with
upstream's keyword names); it runs the studio's one sampler, `device_worker.model.sampling.sample`, with the
transformer as its backbone, so this script needs no upstream checkout. Lyric ids and the style embedding
are random here (upstream makes them with `get_lrc_token` / `get_style_prompt`; a worker started with
`style=` embeds prompts itself: `worker.style_text(["jazz, piano"])`).

    python examples/upstream_style.py --dit DIT_DIR --vae vae_model.pt --negative-style vocal.npy --out song.npz

song.npz (plain arrays, no pickle) holds the inputs (`text`, `style`, `negative_style`), the `latent`
[N, 64] and the `audio` [2, N * 2048]. One JSON line on stdout says what was made.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

import numpy as np
import torch

from device_worker.model.sampling import sample
from device_worker.protocol import SongParams
from engine.remote_dit import RemoteDiT, RemoteVae
from engine.worker_client import Worker


class CFM(torch.nn.Module):
    """Upstream's CFM as its inference scripts see it: a `.transformer` and `.sample(...)`."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer

    @torch.no_grad()
    def sample(self, cond: torch.Tensor | None, text: torch.Tensor, duration: int, *, style_prompt: torch.Tensor,
               negative_style_prompt: torch.Tensor, steps: int = 32, cfg_strength: float = 4.0,
               sway_sampling_coef: float | None = None, seed: int | None = None, start_time: float = 0.0,
               latent_pred_segments: Sequence[tuple[int, int]] | None = None,
               song_duration: float | None = None) -> tuple[torch.Tensor, None]:
        """(latent [B, N, 64], trajectory): upstream also returns the trajectory; this keeps no steps."""
        # upstream's argument names -> the studio's one set of song settings
        params = SongParams(steps=steps, cfg=cfg_strength, seed=seed, sway=sway_sampling_coef, start_time=start_time,
                            song_duration=song_duration,
                            edit_segments=[list(s) for s in latent_pred_segments] if latent_pred_segments else None)
        latent = sample(self.transformer, text=text, style=style_prompt, negative_style=negative_style_prompt,
                        duration=duration, cond=cond, params=params)
        return latent, None


def song_inputs(frames: int, seed: int, negative_style: np.ndarray | None) -> dict[str, np.ndarray]:
    """Stand-ins for upstream's inputs: a line of 8 random lyric ids every 16 frames (0 = no lyric there),
    a unit style vector, and the negative style (zeros without vocal.npy)."""
    rng = np.random.default_rng(seed)
    text = np.zeros(frames, np.int64)
    for start in range(4, frames - 8, 16):
        text[start : start + 8] = rng.integers(3, 300, 8)
    style = rng.standard_normal(512).astype(np.float32)
    neg = np.zeros((1, 512)) if negative_style is None else negative_style.reshape(-1, 512)
    return {"text": text, "style": style / np.linalg.norm(style), "negative_style": neg[0].astype(np.float32)}


def make_song(worker: Worker, inputs: dict[str, np.ndarray], *, steps: int, cfg_strength: float, seed: int,
              window: int = 128, overlap: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Upstream's calling code against the worker -> (latent [N, 64], audio [2, N * 2048])."""
    cfm = CFM(transformer=RemoteDiT(worker))
    vae = RemoteVae(worker, window=window, overlap=overlap)
    frames = len(inputs["text"])
    latents, _ = cfm.sample(
        cond=None, text=torch.from_numpy(inputs["text"])[None], duration=frames,
        style_prompt=torch.from_numpy(inputs["style"])[None],
        negative_style_prompt=torch.from_numpy(inputs["negative_style"])[None],
        steps=steps, cfg_strength=cfg_strength, seed=seed,
    )
    audio = vae.decode(latents.transpose(1, 2))  # [1, 2, N * 2048]
    return latents[0].numpy(), audio[0].numpy()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dit", required=True, help="DiT checkpoint folder (cfm_model.pt + config.json)")
    ap.add_argument("--vae", required=True, help="VAE checkpoint (vae_model.pt)")
    ap.add_argument("--negative-style", help="upstream's vocal.npy (the negative style prompt); default zeros")
    ap.add_argument("--frames", type=int, default=64, help="song length in latent frames (2048 = 95 s)")
    ap.add_argument("--steps", type=int, default=8, help="sampler steps (upstream's default is 32)")
    ap.add_argument("--cfg", type=float, default=4.0, help="classifier-free guidance strength")
    ap.add_argument("--seed", type=int, default=1, help="noise seed (also draws the random lyrics and style)")
    ap.add_argument("--window", type=int, default=128, help="VAE decode window in latent frames")
    ap.add_argument("--overlap", type=int, default=32, help="VAE window overlap in latent frames")
    ap.add_argument("--threads", type=int, help="the worker's torch threads (1 for bit-exact comparisons)")
    ap.add_argument("--precision", default="auto", help="the worker's precision (float32: the exact path)")
    ap.add_argument("--out", required=True, help="output .npz")
    args = ap.parse_args(argv)

    neg = np.load(args.negative_style) if args.negative_style else None
    inputs = song_inputs(args.frames, args.seed, neg)
    started = time.monotonic()
    with Worker(dit=args.dit, vae=args.vae, threads=args.threads, precision=args.precision) as worker:
        worker.wait_ready(120)
        latent, audio = make_song(worker, inputs, steps=args.steps, cfg_strength=args.cfg, seed=args.seed,
                                  window=args.window, overlap=args.overlap)
    np.savez(args.out, latent=latent, audio=audio, **inputs)
    print(json.dumps({"out": args.out, "frames": args.frames, "steps": args.steps, "audio_samples": audio.shape[-1],
                      "seconds": round(time.monotonic() - started, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
