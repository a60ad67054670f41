"""The torch backend (CPU and CUDA): the model core driven one unit at a time.

The backbone is the model core's `DiT` itself: a guided step is `sampling.step_song` (both guidance
branches in one batch of 2), and the VAE windows are `OobleckVAE.decode_windows` advanced one `next()` per
unit, so a song through the worker is the same sequence of torch calls as `sampling.sample` +
`decode_windows` in-process: the same bytes (`SamplerBackend` holds the song calls).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from device_worker.backends.base import NotSupported, Progress, SamplerBackend, to_numpy, to_torch
from device_worker.wire import Tensor

logger = logging.getLogger(__name__)
GPU_DECODE_WINDOW = 512  # latent frames per VAE window on a CUDA GPU (bench/gpu_song.py --window compares)
MPS_DECODE_WINDOW = 256  # on Apple's MPS, whose memory is the machine's own

_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def model_id(path: str) -> str:
    """A cheap identity for a checkpoint: name, size and a hash of its first and last MiB."""
    p = Path(path)
    if p.is_dir():
        files = [f for f in (p / "cfm_model.pt", p / "cfm_model.safetensors") if f.is_file()]
        p = files[0] if files else p
    if not p.is_file():
        return p.name
    size = p.stat().st_size
    h = hashlib.blake2b(digest_size=8)
    with open(p, "rb") as fh:
        h.update(fh.read(1 << 20))
        if size > 2 << 20:
            fh.seek(size - (1 << 20))
            h.update(fh.read())
    return f"{p.parent.name}/{p.name}:{size}:{h.hexdigest()}"


def vae_dtype(device: str, precision: str) -> Any:
    """The VAE's dtype: float16 on a GPU (CUDA or Apple's MPS) whenever the DiT runs in half precision
    (Snake activations stay float32 inside `vae.py`; float16 keeps more mantissa than bfloat16, and the
    decoder's activations stay far below its range), float32 on the CPU (half convolutions are slow there,
    bfloat16 ones too without AMX) and for the exact path."""
    import torch

    return torch.float16 if is_gpu(device) and precision != "float32" else torch.float32


def is_gpu(device: str) -> bool:
    return device.startswith(("cuda", "mps"))


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AMX tiles or AVX512-BF16): there a bfloat16 GEMM
    runs ~5x faster than float32; elsewhere torch emulates it, several times slower than float32."""
    import torch

    probes = [getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    return any(bool(probe()) for probe in probes if probe is not None)


class TorchBackend(SamplerBackend):
    name = "torch"

    def __init__(self, device: str = "cpu", precision: str = "float32", threads: int | None = None,
                 half_mode: str = "mixed", style_path: str | None = None, compile: str = "auto",
                 lyrics_model: str | None = None) -> None:
        if precision not in _DTYPES:
            raise ValueError(f"precision {precision!r} is not one of {sorted(_DTYPES)}")
        super().__init__(device, precision)
        self.threads = threads
        self.half_mode = half_mode  # how half weights run (device_worker.model.load.load_dit)
        self.style_path = style_path
        self.compile = compile  # device_worker.model.compiled.should_compile
        self.compile_s = 0.0
        self._style_model: Any = None
        self.lyrics_model = lyrics_model
        self._transcriber: Any = None  # loaded on the first TRANSCRIBE, then kept (as the style model)
        self.dit: Any = None
        self.vae: Any = None

    # ---- the core five -------------------------------------------------------------------------------
    def load(self, dit: str, vae: str, progress: Progress) -> dict[str, str]:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        # Bit-faithful fp32 on GPUs: TF32 would change every matmul and conv (see the reference README).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if self.device == "mps" and not torch.backends.mps.is_available():
            raise RuntimeError(f"mps was asked for, but this worker's torch ({torch.__version__}) sees no Apple GPU "
                               "(MPS needs macOS 12.3+ on Apple silicon); use --device cpu")
        if self.device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise RuntimeError(f"{self.device} was asked for, but this worker's torch ({torch.__version__}) "
                                   "sees no CUDA GPU; install a CUDA build of torch or use --device cpu")
            index = torch.device(self.device).index or 0
            if index >= torch.cuda.device_count():
                raise RuntimeError(f"{self.device} does not exist: this machine has "
                                   f"{torch.cuda.device_count()} CUDA device(s)")
            torch.cuda.set_device(torch.device(self.device))
        from device_worker.model.load import load_dit
        from device_worker.model.vae import load_vae

        progress("dit", 0.05)
        self.dit = self.backbone = load_dit(dit, device=self.device, dtype=getattr(torch, self.precision),
                                            half_mode=self.half_mode)
        from device_worker.model.compiled import CompiledDiT, should_compile

        if should_compile(self.compile, self.device):
            progress("compile", 0.3)  # before READY: the first song pays no compile time
            self.backbone = CompiledDiT(self.dit)
            self.compile_s = self.backbone.warm(self.dit.config.max_frames)  # a failure leaves the eager step
        progress("vae", 0.7)
        self.vae = load_vae(vae, device=self.device, dtype=vae_dtype(self.device, self.precision))
        if self.style_path:
            progress("style", 0.85)
            self._style_model = self._load_style(self.style_path)
        progress("loaded", 1.0)
        ids = {"dit": model_id(dit), "vae": model_id(vae)}
        if self.style_path:
            ids["style"] = model_id(self.style_path)
        return ids

    def _decode(self, latent: Any, window: int, overlap: int) -> Iterator[Any]:
        for block in self.vae.decode_windows(latent.to(self.device), window, overlap):
            yield block[0]  # [1, 2, n] -> [2, n]

    # ---- optional services ---------------------------------------------------------------------------
    def encode(self, audio: np.ndarray, seed: int) -> np.ndarray:
        from device_worker.model.vae import draw_latent

        encoded = self.vae.encode(to_torch(audio)[None].to(self.device))  # [1, 128, T]
        return to_numpy(draw_latent(encoded, seed)[0].T)  # [T, 64]

    def _load_style(self, path: str) -> Any:
        try:
            from device_worker.style import load_style_model
        except ImportError as exc:
            raise NotSupported(f"style model not loaded: device_worker.style has no load_style_model ({exc})") from None
        return load_style_model(path)

    def style(self, texts: Sequence[str] | None, audio: np.ndarray | None) -> np.ndarray:
        if self._style_model is None:
            raise NotSupported("style model not loaded: start the worker with --style PATH")
        if texts is not None:
            emb = self._style_model.embed_text(list(texts))
        else:
            emb = self._style_model.embed_audio(to_torch(audio))
        return np.ascontiguousarray(emb.detach().float().cpu().numpy())

    def transcribe(self, audio: np.ndarray, windows: Sequence[Sequence[float]] | None,
                   language: str | None) -> tuple[str, list[Any]]:
        if not self.lyrics_model:
            raise NotSupported("lyrics model not loaded: start the worker with --lyrics-model PATH")
        if self._transcriber is None:
            from device_worker.transcribe import load_transcriber

            # float32 on the CPU (Whisper's half-precision CPU paths are slow), float16 on a GPU
            dtype = None if not is_gpu(self.device) else __import__("torch").float16
            self._transcriber = load_transcriber(self.lyrics_model, device=self.device, dtype=dtype)
        spans = [(float(a), float(b)) for a, b in windows] if windows else None
        words = self._transcriber.transcribe(np.asarray(audio, np.float32), spans, language)
        return model_id(self.lyrics_model), words

    def forward(self, tensors: Mapping[str, Tensor], drop_audio_cond: bool, drop_text: bool,
                drop_prompt: bool) -> Tensor:
        import torch

        t = {k: to_torch(v).to(self.device) for k, v in tensors.items()}
        with torch.inference_mode():
            v = self.dit(t["x"], t["cond"], t["text"], t["time"], drop_audio_cond, drop_text, drop_prompt,
                         style_prompt=t["style_prompt"], start_time=t.get("start_time"),
                         duration=t.get("duration"))
        return to_numpy(v)

    def compile_note(self) -> str:
        """What the page and the ready line say of the step: compiled, off, or uncompiled and why."""
        failure = getattr(self.backbone, "failure", None)
        if failure:
            return f"uncompiled (compiling failed: {failure})"
        return "compiled" if self.backbone is not self.dit else "off"

    def device_bytes(self) -> int:
        import torch

        if self.device.startswith("cuda"):
            return int(torch.cuda.memory_allocated(torch.device(self.device)))
        if self.device == "mps":
            return int(torch.mps.current_allocated_memory())
        return 0

    @property
    def decode_window_frames(self) -> int:
        # On a CUDA GPU, 512-frame windows (24 s of audio; under 0.3 GB of fp16 activations, measured on an
        # H200 with bench/gpu_song.py): a quarter of the windows, so a quarter of the overlap recomputed and
        # of the launches. Apple's MPS shares the machine's memory with everything else: half that. The CPU
        # keeps 128.
        if self.device.startswith("cuda"):
            return GPU_DECODE_WINDOW
        return MPS_DECODE_WINDOW if self.device == "mps" else super().decode_window_frames

    def synchronize(self) -> None:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize(torch.device(self.device))
        elif self.device == "mps":
            torch.mps.synchronize()

    def take_peak_bytes(self) -> int:
        if self.device == "mps":  # MPS keeps no peak: what the driver holds now stands in for it
            import torch

            return int(torch.mps.driver_allocated_memory())
        if not self.device.startswith("cuda"):
            return 0
        import torch

        dev = torch.device(self.device)
        peak = int(torch.cuda.max_memory_allocated(dev))
        torch.cuda.reset_peak_memory_stats(dev)
        return peak

    def info(self) -> dict[str, str]:
        import torch

        out = {"torch": str(torch.__version__), "threads": str(torch.get_num_threads()), "half_mode": self.half_mode,
               "pid": str(os.getpid()), "compile": self.compile_note(), "compile_s": f"{self.compile_s:.1f}"}
        out["compiled"] = str(out["compile"] == "compiled").lower()
        if self.dit is not None:  # what RemoteDiT needs to stand in for the DiT on the host
            config = self.dit.config
            out.update({"dit.mel_dim": str(config.mel_dim), "dit.max_frames": str(config.max_frames),
                        "dit.duration_embed": str(int(bool(config.duration_embed))),
                        "dit.dtype": str(self.dit.dtype).removeprefix("torch."),
                        "dit.state_dtype": str(self.dit.state_dtype).removeprefix("torch.")})
        if self.device.startswith("cuda"):
            out["gpu"] = torch.cuda.get_device_name(torch.device(self.device))
        return out
