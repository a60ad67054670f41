"""The device worker's configuration, declared once.

`WorkerConfig` is the one list of what a worker can be told. Everything else is made from it:
`python -m device_worker`'s flags (`add_arguments`), `studio worker`'s click options (built from
`OPTIONS` there), and the command line the engine starts a worker with (`to_argv`). A new option is one
field here, with its flag's help in the field's metadata; no caller lists flags by hand.

No torch, no zmq: the engine and the studio import this without loading a backend.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from device_worker.model.config import HALF_MODES
from device_worker.scheduler import POLICIES

PRECISIONS = ("auto", "float32", "float16", "bfloat16")
COMPILE_CHOICES = ("auto", "on", "off")  # device_worker.model.compiled.should_compile


def _opt(default: Any = None, help: str = "", *, type: Any = str, choices: tuple[str, ...] | None = None,
         required: bool = False, path: bool = False, flag: bool = True) -> Any:
    """A field with its command-line flag described: `--name-with-dashes`, its type, help and choices.
    `path`: an existing file or folder (checked by `studio worker`); `flag=False`: not a command-line option."""
    meta = {"help": help, "type": type, "choices": choices, "required": required, "path": path, "flag": flag}
    return field(default=default, metadata=meta)


@dataclass
class WorkerConfig:
    dit: str = _opt(None, "DiT checkpoint folder or cfm_model.pt", required=True, path=True)
    vae: str = _opt(None, "VAE checkpoint (vae_model.pt)", required=True, path=True)
    bind: str = _opt("", "ipc://PATH or tcp://127.0.0.1:PORT (another host needs --secret-file)", required=True)
    backend: str = _opt("torch", "torch (CPU/CUDA) or ttnn")
    device: str = _opt("auto", "auto (CUDA if visible, else MPS, else the CPU), cpu, cuda:N, mps, or the ttnn device id")
    style: str | None = _opt(None, "style model (MuQ-MuLan) checkpoint; omit to run without", path=True)
    lyrics_model: str | None = _opt(None, "Whisper checkpoint folder for the lyrics check (loaded on first use); "
                                    "omit to run without", path=True)
    precision: str = _opt("auto", "weights and compute precision; auto: bfloat16 (mixed) on CUDA and on CPUs with "
                          "native bfloat16 (AMX), float16 on MPS, float32 on other CPUs and for ttnn (its own "
                          "settings apply); float32 is the exact path", choices=PRECISIONS)
    compile: str = _opt("auto", "compile the DiT step per song shape with torch.compile, at load (auto: on CUDA)",
                        choices=COMPILE_CHOICES)
    half_mode: str = _opt("mixed", "how float16/bfloat16 weights run: mixed (float32 norms, residual stream and "
                          "sampler state) or upstream (everything in half precision, as upstream's model.half())",
                          choices=HALF_MODES)
    policy: str = _opt("fair", "which job's next unit runs", choices=POLICIES)
    max_jobs: int = _opt(8, "song jobs held at once (told to the engine)", type=int)
    threads: int | None = _opt(None, "torch intra-op threads (default: torch's)", type=int)
    lock_dir: str | None = _opt(None, "folder of the one-worker-per-device lock files (GPU, card; never the CPU)")
    secret_file: str | None = _opt(None, "shared secret: every message carries an HMAC", path=True)
    parent_pid: int | None = _opt(None, "exit when this process (the engine that started the worker) is gone",
                                  type=int)
    log_level: str = _opt("INFO", "logging level")
    # The key itself, for a worker built in-process (tests); a process reads it from `secret_file`.
    secret: bytes | None = _opt(None, flag=False)

    def __post_init__(self) -> None:
        for f in OPTIONS:
            value = getattr(self, f.name)
            choices = f.metadata["choices"]
            if choices and value not in choices:
                raise ValueError(f"{flag(f)} must be one of {', '.join(choices)}, got {value!r}")
        if self.max_jobs < 1:
            raise ValueError(f"--max-jobs must be at least 1, got {self.max_jobs}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {self.threads}")

    def to_argv(self) -> list[str]:
        """The flags that give a worker process this configuration (None and the secret left out)."""
        argv: list[str] = []
        for f in OPTIONS:
            value = getattr(self, f.name)
            if value is not None and (f.metadata["required"] or value != f.default):
                argv += [flag(f), str(value)]
        return argv


def resolve_precision(backend: str, device: str, precision: str, *, cpu_bf16: bool = False) -> str:
    """What "auto" means on this device: half precision where it is fast, float32 where it is not.
    CUDA: bfloat16 weights and matmuls, float32 norms, RoPE, residual stream and sampler state (the
    "mixed" mode). Apple's MPS: float16 mixed (its bfloat16 needs macOS 14, float16 runs everywhere).
    The CPU: bfloat16 mixed when it multiplies bfloat16 natively (`cpu_bf16`: AMX or AVX512-BF16, a
    bfloat16 GEMM ~5x float32), float32 elsewhere (emulated bfloat16 is several times slower than float32:
    bench/cpu_step.py). ttnn: float32 here, the card's DRPrecision decides there."""
    if precision != "auto":
        return precision
    if backend != "torch":
        return "float32"
    if device.startswith("cuda"):
        return "bfloat16"
    if device == "mps":
        return "float16"
    return "bfloat16" if device == "cpu" and cpu_bf16 else "float32"


OPTIONS: tuple[dataclasses.Field, ...] = tuple(f for f in dataclasses.fields(WorkerConfig) if f.metadata["flag"])


def flag(f: dataclasses.Field) -> str:
    return "--" + f.name.replace("_", "-")


def add_arguments(parser: Any) -> None:
    """`python -m device_worker`'s flags (argparse), one per option."""
    for f in OPTIONS:
        m = f.metadata
        kwargs: dict[str, Any] = {"type": m["type"], "help": m["help"], "dest": f.name}
        if m["required"]:
            kwargs["required"] = True
        else:
            kwargs["default"] = f.default
        if m["choices"]:
            kwargs["choices"] = m["choices"]
        parser.add_argument(flag(f), **kwargs)
