"""The jobs file: one JSON object per line, each a song; every problem found before anything renders.

A line is checked in two passes. First its shape (JSON, known keys, types, a folder-safe unique id,
lyrics and style files that exist), which needs no model; then the engine's own request validation
(duration, steps, cfg, lyric layout line by line) through a `validate` callable. Problems carry the jobs
file's line number, the field and the message, so one report fixes a whole file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.request import Reference, SongRequest, Style
from engine.textfile import TextFileError, read_text_file

KEYS = frozenset({"id", "lyrics", "style", "duration", "seed", "variations", "steps", "cfg", "formats", "edit"})
REQUIRED = ("id", "style", "duration")
STYLE_KEYS = frozenset({"audio", "embedding"})
EDIT_KEYS = frozenset({"song", "segments"})
LYRIC_SUFFIXES = (".lrc", ".txt")
JOBS_FILE_LIMIT = 32 * 1024 * 1024  # inline lyrics make lines long; a jobs file this big is a wrong file
# Ids name folders: no separators, no dot-files (our temporaries are dot-files), nothing a shell mangles.
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class JobProblem:
    line: int  # line in the jobs file (1-based)
    job_id: str | None
    field: str
    message: str
    lyric_line: int | None = None  # the lyrics' own line number, for lyric layout problems

    def __str__(self) -> str:
        who = f" (id {self.job_id!r})" if self.job_id else ""
        where = f"{self.field} line {self.lyric_line}" if self.lyric_line is not None else self.field
        return f"line {self.line}{who}: {where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "id": self.job_id, "field": self.field, "message": self.message,
                "lyric_line": self.lyric_line}


@dataclass
class RenderJob:
    """One valid (or not yet checked) line: its request, plus what identity needs about its files."""

    id: str
    line: int
    request: SongRequest
    raw: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # role -> resolved path (lyrics, style, edit.song)


@dataclass
class ParsedJobs:
    jobs: list[RenderJob]  # valid jobs, in file order
    problems: list[JobProblem]
    lines: dict[int, str | None]  # every job line -> its id when it had one (for the manifest)

    @property
    def invalid_lines(self) -> list[int]:
        return sorted({p.line for p in self.problems})


def read_jobs_text(path: str) -> str:
    """The jobs file as text (any encoding `engine.textfile` reads; '-' is stdin)."""
    return read_text_file(path, limit=JOBS_FILE_LIMIT).text


def parse_jobs(text: str, base_dir: Path, validate: Callable[[SongRequest], list[Any]] | None = None) -> ParsedJobs:
    """Every job line checked; `validate(request)` returns the engine's problems (`engine.request.Problem`).

    Relative paths in a job are relative to `base_dir` (the jobs file's folder), so a jobs file and its
    lyrics travel together. Every line of a duplicated id is invalid: which one was meant is unknowable.
    """
    problems: list[JobProblem] = []
    jobs: list[RenderJob] = []
    lines: dict[int, str | None] = {}
    seen: dict[str, list[int]] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        if not raw_line.strip():
            continue
        job, line_problems = _parse_line(raw_line, number, base_dir)
        job_id = job.id if job is not None else _loose_id(raw_line)
        lines[number] = job_id
        if job_id is not None:
            seen.setdefault(job_id, []).append(number)
        if job is not None and validate is not None:
            line_problems += [JobProblem(number, job.id, _field(p.field), p.message, getattr(p, "line", None))
                             for p in validate(job.request)]
        problems += line_problems
        if job is not None and not line_problems:
            jobs.append(job)
    for job_id, numbers in seen.items():
        if len(numbers) > 1:
            where = ", ".join(map(str, numbers))
            problems += [JobProblem(n, job_id, "id", f"{job_id!r} is used on lines {where}; ids must be unique")
                         for n in numbers]
    problems = list(dict.fromkeys(problems))  # one cause can reach us twice (request and model checks)
    bad = {p.line for p in problems}
    problems.sort(key=lambda p: (p.line, p.field != "id"))
    if not lines:
        problems.append(JobProblem(0, None, "file", "no jobs: the file is empty"))
    return ParsedJobs([j for j in jobs if j.line not in bad], problems, lines)


def _field(name: str) -> str:
    # The engine names a text style "style.text"; in a jobs file it is the plain `style` string.
    return "style" if name == "style.text" else name


def _loose_id(raw_line: str) -> str | None:
    try:
        obj = json.loads(raw_line)
    except ValueError:
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) and value else None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_line(raw_line: str, n: int, base: Path) -> tuple[RenderJob | None, list[JobProblem]]:
    try:
        obj = json.loads(raw_line)
    except ValueError as exc:
        return None, [JobProblem(n, None, "json", f"not valid JSON: {exc}")]
    if not isinstance(obj, dict):
        return None, [JobProblem(n, None, "json", f"a job is a JSON object, got {type(obj).__name__}")]
    job_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    out: list[JobProblem] = []

    def bad(name: str, message: str) -> None:
        out.append(JobProblem(n, job_id, name, message))

    unknown = sorted(set(obj) - KEYS)
    if unknown:
        bad("keys", f"unknown key(s) {unknown}; allowed: {sorted(KEYS)}")
    for key in REQUIRED:
        if key not in obj:
            bad(key, "missing (required)")
    if "id" in obj and (job_id is None or not ID_RE.match(job_id)):
        bad("id", f"{obj['id']!r} is not a usable folder name: 1-100 of letters, digits, '.', '_', '-', "
                  "starting with a letter or digit")
    if "duration" in obj and not _is_number(obj["duration"]):
        bad("duration", f"a number of seconds, got {obj['duration']!r}")
    for key in ("seed", "variations", "steps"):
        if key in obj and not _is_int(obj[key]):
            bad(key, f"a whole number, got {obj[key]!r}")
    if "cfg" in obj and not _is_number(obj["cfg"]):
        bad("cfg", f"a number, got {obj['cfg']!r}")
    formats = obj.get("formats", ["wav"])
    if not (isinstance(formats, list) and formats and all(isinstance(f, str) for f in formats)):
        bad("formats", f'a list such as ["wav", "flac"], got {formats!r}')
    files: dict[str, str] = {}
    lyrics = _lyrics(obj.get("lyrics", ""), base, files, bad)
    style = _style(obj.get("style"), base, files, bad) if "style" in obj else None
    edit = _edit(obj["edit"], base, files, bad) if obj.get("edit") is not None else None
    if style is None or any(p.field != "keys" for p in out):
        return None, out  # not typed well enough to ask the engine; an unknown key alone still is
    kwargs = {k: obj[k] for k in ("seed", "variations", "steps", "cfg") if k in obj}
    request = SongRequest(lyrics=lyrics, style=style, duration=obj["duration"], formats=tuple(formats),
                          edit=edit, title=str(job_id), **kwargs)
    return RenderJob(str(job_id), n, request, obj, files), out


def _path(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _lyrics(value: Any, base: Path, files: dict[str, str], bad: Callable[[str, str], None]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        bad("lyrics", f"LRC or plain text, or a path to a .lrc/.txt file; got {type(value).__name__}")
        return ""
    one_line = "\n" not in value.strip()
    if one_line and value.strip().lower().endswith(LYRIC_SUFFIXES):
        path = _path(value.strip(), base)
        try:
            text = read_text_file(path).text
        except TextFileError as exc:
            bad("lyrics", str(exc))
            return ""
        files["lyrics"] = str(path)
        return text
    return value


def _style(value: Any, base: Path, files: dict[str, str], bad: Callable[[str, str], None]) -> Style | None:
    if isinstance(value, str):
        return Style(text=value)  # an empty prompt is the engine's problem to name
    if isinstance(value, dict) and len(value) == 1 and set(value) <= STYLE_KEYS:
        (key, path), = value.items()
        if not isinstance(path, str) or not path:
            bad(f"style.{key}", f"a file path, got {path!r}")
            return None
        resolved = _path(path, base)
        if not resolved.is_file():
            bad(f"style.{key}", f"file not found: {resolved}")
            return None
        files[f"style.{key}"] = str(resolved)
        return Style(**{key: str(resolved)})
    bad("style", 'a text prompt, {"audio": PATH} or {"embedding": PATH_TO_NPY}; '
                 f"got {json.dumps(value)[:80]}")
    return None


def _edit(value: Any, base: Path, files: dict[str, str], bad: Callable[[str, str], None]) -> Reference | None:
    if not isinstance(value, dict):
        bad("edit", f'{{"song": PATH, "segments": [[start_s, end_s], ...]}}, got {json.dumps(value)[:80]}')
        return None
    unknown = sorted(set(value) - EDIT_KEYS)
    if unknown:
        bad("edit", f"unknown key(s) {unknown}; allowed: {sorted(EDIT_KEYS)}")
    song, segments = value.get("song"), value.get("segments")
    if not isinstance(song, str) or not song:
        bad("edit.song", f"a path to the song to edit, got {song!r}")
        return None
    ok = isinstance(segments, list) and segments and all(
        isinstance(s, list) and len(s) == 2 and all(_is_number(x) for x in s) for s in segments)
    if not ok:
        bad("edit.segments", f"a list of [start_s, end_s] pairs (-1 = song start/end), got {segments!r}")
        return None
    resolved = _path(song, base)
    if not resolved.is_file():
        bad("edit.song", f"file not found: {resolved}")
        return None
    files["edit.song"] = str(resolved)
    return Reference.edit(str(resolved), segments)
