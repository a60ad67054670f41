"""`studio lyrics heard TAKE.wav --lyrics song.lrc`: did the take sing the lyrics? Line by line.

The take is heard by Whisper in a child process (`python -m device_worker.transcribe`: this command
never loads the DiT, and the studio process never imports torch), then scored exactly as the studio
scores its own takes (engine.hearing, engine.lyrics.heard). Exit status: 0 every line sung or partly
sung, 1 some line was missed, 2 the input could not be read or no recogniser is available.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
import numpy as np

from studio.cli.common import (  # studio.cli.lyrics registers this
    EXIT_LOST,
    EXIT_OK,
    EXIT_UNREADABLE,
    read_lyrics,
)

MARK = {"sung": "sung  ", "partly": "partly", "missed": "MISSED"}


def child_transcriber(folder: str, device: str = "cpu") -> Any:
    """engine.hearing.Transcribe through a child process running the worker's transcriber."""

    def transcribe(audio: np.ndarray, windows: list[list[float]], language: str) -> tuple[str, list]:
        with tempfile.TemporaryDirectory(prefix="drs-heard-") as tmp:
            np.save(Path(tmp) / "audio.npy", audio)
            (Path(tmp) / "windows.json").write_text(json.dumps(windows))
            proc = subprocess.run([sys.executable, "-m", "device_worker.transcribe", folder, str(Path(tmp) / "audio.npy"),
                                   str(Path(tmp) / "windows.json"), language, device],
                                  capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["the transcriber failed"])[-1]
            raise RuntimeError(last)
        out = json.loads(proc.stdout)
        return out["model"], [tuple(w) for w in out["words"]]

    return transcribe


def _fail(text: str) -> None:
    click.echo(f"error: {text}", err=True)
    sys.exit(EXIT_UNREADABLE)


def report_text(check: dict[str, Any]) -> str:
    rows = [f"heard by {check['model']}: PER {check['per']:.1%}" if check.get("per") is not None
            else f"heard by {check['model']}: nothing to score"]
    for ln in check["lines"]:
        minutes, seconds = divmod(ln["time"], 60)
        rows.append(f"  {MARK.get(ln['status'], ln['status'])} {ln['score']:4.2f}  [{int(minutes):02d}:{seconds:05.2f}] "
                    f"{ln['expected']}" + (f"   (heard: {ln['heard']})" if ln["heard"] != ln["expected"] else ""))
    missed = sum(ln["status"] == "missed" for ln in check["lines"])
    rows.append(f"{missed} line(s) missed" if missed else "every line was heard")
    return "\n".join(rows)


@click.command("heard")
@click.argument("take", type=click.Path(exists=True, dir_okay=False))
@click.option("--lyrics", "lyrics_path", required=True, metavar="PATH", help="The lyrics the take was made from (LRC).")
@click.option("--duration", "-d", type=float, default=None,
              help="The song length the take was made for (95, or 96-285) [default: the file's length].")
@click.option("--json", "as_json", is_flag=True, help="Print the per-line report as JSON.")
@click.option("--lyrics-model", default="auto", metavar="auto|NAME|PATH",
              help="The Whisper to hear it with [default: whisper-small on the CPU, large-v3-turbo with --device cuda].")
@click.option("--device", default="cpu", help="Where the recogniser runs (cpu, cuda:0, mps).")
@click.option("--model", type=click.Choice(["release", "test"]), default="release",
              help="'test': the test model's g2p and tiny random Whisper (hears nothing meaningful; offline).")
@click.option("--models-dir", type=click.Path(file_okay=False), default=None, help="Folder of model files laid out by hand.")
def heard(take: str, lyrics_path: str, duration: float | None, as_json: bool, lyrics_model: str, device: str,
          model: str, models_dir: str | None) -> None:
    """Hear TAKE (an audio file) and report, line by line, whether the lyrics were sung."""
    from device_worker.shapes import max_frames_for
    from engine.hearing import HEAR_RATE, check_audio, read_hearing
    from engine.lyrics import EspeakMissing, VocabError
    from engine.request import SongRequest, layout_request_lyrics

    text = read_lyrics(lyrics_path)
    try:
        audio = read_hearing(take)
    except Exception as exc:  # noqa: BLE001 - not audio, or a format soundfile cannot read
        _fail(f"{Path(take).name}: not a readable audio file ({type(exc).__name__})")
    seconds = len(audio) / HEAR_RATE
    if duration is None:
        duration = 95.0 if seconds <= 95.5 else float(min(max(round(seconds), 96), 285))
    try:
        max_frames_for(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--duration") from None
    if model == "test":
        from studio.testmodel import ensure_test_models, lyric_tokenizer

        tokenizer, folder = lyric_tokenizer(), ensure_test_models().lyrics
    else:
        from studio.lyrics_model import resolve_lyrics_model

        try:
            from engine.lyrics import LyricTokenizer

            tokenizer = LyricTokenizer(models_dir=models_dir) if models_dir else LyricTokenizer()
            folder, line = resolve_lyrics_model(lyrics_model, (device,), models_dir)
        except (VocabError, EspeakMissing, ValueError) as exc:
            _fail(str(exc))
        if folder is None:
            _fail(line.replace("lyrics check: off ", "no recogniser "))
    try:
        layout = layout_request_lyrics(SongRequest(lyrics=text, duration=duration), tokenizer=tokenizer)
    except (VocabError, EspeakMissing, ValueError) as exc:
        _fail(str(exc))
    report = [r.to_dict() for r in layout.lines]
    try:
        check = check_audio(audio, report, layout.end_frame, child_transcriber(str(folder), device), tokenizer)
    except RuntimeError as exc:
        _fail(f"the recogniser failed: {exc}")
    click.echo(json.dumps(check, ensure_ascii=False, indent=1) if as_json else report_text(check))
    sys.exit(EXIT_LOST if any(ln["status"] == "missed" for ln in check["lines"]) else EXIT_OK)
