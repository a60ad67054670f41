"""Audio files encoded in a child process, in blocks.

The encoders are native code (libsndfile with libvorbis, LAME, FLAC). One of them crashing — libsndfile
1.2.2 segfaults when a 95 s song goes to OGG in one `write` call — must cost one take, not the studio or
a whole batch. So the parent hands the int16 samples to `python -m engine.encoder` through a raw file
in the take's folder and the child writes every format in blocks, tags it and renames it into place,
reporting each finished format on stdout. A child that dies by a signal becomes an `EncoderError`
naming the format it was writing. numpy, soundfile and mutagen only: no torch here or in the child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_RATE = 44_100  # device_worker.shapes.SAMPLE_RATE; not imported so the child starts lean
BLOCK_FRAMES = 1 << 16  # ~1.5 s per encoder call: far below what crashes libsndfile's Vorbis path

# format -> (soundfile format, subtype). WAV/FLAC carry the int16 samples exactly; MP3/OGG are lossy
# encodes of the same int16 signal.
SF_FORMATS = {
    "wav": ("WAV", "PCM_16"),
    "flac": ("FLAC", "PCM_16"),
    "mp3": ("MP3", "MPEG_LAYER_III"),
    "ogg": ("OGG", "VORBIS"),
}


class EncoderError(RuntimeError):
    """Writing one take's audio failed; the message is for the musician (no paths, no tracebacks)."""


def encode(folder: Path, stem: str, pcm: np.ndarray, formats: tuple[str, ...], tags: dict[str, str],
           timeout_s: float | None = None) -> dict[str, str]:
    """Write `pcm` (int16 [n, 2]) as `folder/stem.<fmt>` for each format, in a child process.

    Returns format -> path of every file written. On failure nothing of this call stays on disk.
    """
    unknown = [f for f in formats if f not in SF_FORMATS]
    if unknown:
        raise EncoderError(f"unknown output format {unknown[0]!r}")
    raw = folder / f".{stem}.pcm.partial"
    pcm = np.ascontiguousarray(pcm, dtype="<i2")
    pcm.tofile(raw)
    spec = {"raw": str(raw), "frames": int(pcm.shape[0]), "channels": int(pcm.shape[1]),
            "out": {fmt: str(folder / f"{stem}.{fmt}") for fmt in formats}, "tags": tags}
    # Encoding runs far faster than real time; the bound only catches a wedged encoder.
    timeout = timeout_s if timeout_s is not None else 120.0 + 2.0 * pcm.shape[0] / SAMPLE_RATE
    done: list[str] = []
    try:
        proc = subprocess.Popen([sys.executable, "-m", "engine.encoder"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            out, err = proc.communicate(json.dumps(spec), timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise EncoderError(f"{_current(out, formats).upper()} encoding did not finish within "
                               f"{timeout:.0f} s; this take was not saved") from None
        done = [line[5:] for line in out.splitlines() if line.startswith("done ")]
        if proc.returncode != 0:
            fmt = _current(out, formats).upper()
            if proc.returncode < 0:
                name = signal.Signals(-proc.returncode).name
                raise EncoderError(f"the {fmt} encoder crashed ({name}); this take was not saved — "
                                   f"choose another output format and generate again")
            reason = (err.strip().splitlines() or ["no reason given"])[-1]
            raise EncoderError(f"writing {fmt} failed: {reason}")
    except BaseException:
        for fmt in formats:
            for p in (Path(spec["out"][fmt]), Path(spec["out"][fmt] + ".partial")):
                p.unlink(missing_ok=True)
        raise
    finally:
        raw.unlink(missing_ok=True)
    return {fmt: spec["out"][fmt] for fmt in formats if fmt in done}


def _current(out: str, formats: tuple[str, ...]) -> str:
    """The format the child was writing when it stopped: the first one it did not report done."""
    started = [line[6:] for line in out.splitlines() if line.startswith("start ")]
    finished = {line[5:] for line in out.splitlines() if line.startswith("done ")}
    pending = [f for f in started if f not in finished]
    return pending[0] if pending else (formats[0] if formats else "audio")


# -- the child ------------------------------------------------------------------------------------
def write_blocks(path: Path, pcm: np.ndarray, fmt: str) -> None:
    """One format, `BLOCK_FRAMES` at a time, under a temporary name renamed into place."""
    import soundfile as sf

    major, subtype = SF_FORMATS[fmt]
    tmp = path.with_name(path.name + ".partial")
    lossy = fmt in ("mp3", "ogg")  # the lossy encoders take float of the same int16 signal
    with sf.SoundFile(str(tmp), "w", SAMPLE_RATE, pcm.shape[1], subtype=subtype, format=major) as f:
        for i in range(0, pcm.shape[0], BLOCK_FRAMES):
            block = pcm[i:i + BLOCK_FRAMES]
            f.write(block.astype(np.float32) / np.float32(32768) if lossy else block)
    os.replace(tmp, path)


def tag(path: Path, fmt: str, tags: dict[str, str]) -> None:
    """Title, lyrics, style and seed as the format's native tags (ID3 in WAV/MP3, Vorbis comments)."""
    if fmt in ("flac", "ogg"):
        from mutagen.flac import FLAC
        from mutagen.oggvorbis import OggVorbis

        f = FLAC(path) if fmt == "flac" else OggVorbis(path)
        f["TITLE"] = tags["title"]
        f["LYRICS"] = tags["lyrics"]
        f["COMMENT"] = f"style: {tags['style']}"
        f["STYLE"] = tags["style"]
        f["SEED"] = tags["seed"]
        f["ENCODER"] = tags["software"]
        f.save()
        return
    from mutagen.id3 import COMM, ID3, TIT2, TSSE, TXXX, USLT
    from mutagen.mp3 import MP3
    from mutagen.wave import WAVE

    f = WAVE(path) if fmt == "wav" else MP3(path)
    if f.tags is None:
        f.add_tags()
    id3: ID3 = f.tags
    id3.add(TIT2(encoding=3, text=tags["title"]))
    id3.add(USLT(encoding=3, lang="eng", desc="", text=tags["lyrics"]))
    id3.add(COMM(encoding=3, lang="eng", desc="style", text=tags["style"]))
    id3.add(TXXX(encoding=3, desc="SEED", text=tags["seed"]))
    id3.add(TXXX(encoding=3, desc="STYLE", text=tags["style"]))
    id3.add(TSSE(encoding=3, text=tags["software"]))
    f.save()


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.stdin.read())
    pcm = np.fromfile(spec["raw"], dtype="<i2").reshape(spec["frames"], spec["channels"])
    for fmt, out in spec["out"].items():
        print(f"start {fmt}", flush=True)  # flushed first, so a crash names the format it hit
        write_blocks(Path(out), pcm, fmt)
        tag(Path(out), fmt, spec["tags"])
        print(f"done {fmt}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
