"""Which Whisper the lyrics check uses (`--lyrics-model`): a choice per device, with its reasons.

- On a GPU: `whisper-large-v3-turbo`. large-v3's encoder (the best hearing of singing among open
  recognisers) with 4 decoder layers instead of 32: a 285 s take is ten 30 s windows in one or two
  batches, a few seconds on a card that makes the song in tens of seconds (the target: <= 10% of a
  take's time), in ~1.6 GB of weights beside the DiT's ~4.7 GB peak.
- On the CPU (and Apple's MPS): `whisper-small`. 244 M parameters; large-v3-class decoding on a CPU
  would take longer than the take itself.
- `--model test`: the test model's tiny random Whisper (hears nothing meaningful; the flow is real).
- `off` (or `--no-lyrics-check`): no check. A named model that is not downloaded turns the check off
  with a warning naming `studio models fetch --only NAME`: a missing recogniser never stops the studio.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

GPU_DEFAULT = "whisper-large-v3-turbo"
CPU_DEFAULT = "whisper-small"
REASONS = {
    GPU_DEFAULT: "a GPU: large-v3's hearing, 4-layer decoder, a few % of a take's time",
    CPU_DEFAULT: "the CPU: a 244 M model; a large one would take longer than the song",
}


def gpu_visible(devices: tuple[str, ...] = ()) -> bool:
    """Whether the workers will run on an NVIDIA GPU: a cuda device asked for, or `auto` on a host with
    the NVIDIA driver (the studio process is torch-free, so it asks the driver, not torch)."""
    if any(d.startswith("cuda") for d in devices):
        return True
    if devices and not any(d == "auto" for d in devices):
        return False
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def default_name(devices: tuple[str, ...] = ()) -> str:
    return GPU_DEFAULT if gpu_visible(devices) else CPU_DEFAULT


def resolve_lyrics_model(choice: str, devices: tuple[str, ...], models_dir: str | None) -> tuple[str | None, str]:
    """`--lyrics-model` -> (Whisper folder or None, a line saying what was chosen and why)."""
    from engine import modelfiles as mf

    if choice == "off":
        return None, "lyrics check: off"
    if choice != "auto" and Path(choice).expanduser().is_dir():
        return str(Path(choice).expanduser().resolve()), f"lyrics check: {Path(choice).name} (given folder)"
    names = [choice] if choice != "auto" else [default_name(devices)]
    if choice == "auto":  # the other default when the first is not downloaded
        names.append(CPU_DEFAULT if names[0] == GPU_DEFAULT else GPU_DEFAULT)
    for name in names:
        try:
            path = mf.resolve_file(name, "config.json", models_dir=models_dir).parent
            mf.resolve(name, models_dir=models_dir)  # every file present, not only the config
        except KeyError:
            raise ValueError(f"--lyrics-model {choice}: not a folder and not a model name "
                             f"(known: {GPU_DEFAULT}, {CPU_DEFAULT})") from None
        except FileNotFoundError:
            continue
        why = REASONS.get(name, "asked for") if name == names[0] else f"{names[0]} is not downloaded"
        return str(path), f"lyrics check: {name} ({why})"
    return None, (f"lyrics check: off ({names[0]} is not downloaded; studio models fetch --only {names[0]})")
