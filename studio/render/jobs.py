"""The jobs file: one JSON object per line, each a song; every problem found before anything renders.

A line is checked in two passes. First its shape (JSON, known keys, types, finite numbers, a
folder-safe unique id, lyrics and style files that exist and are regular files), which needs no model;
then the engine's own request validation (duration, steps, cfg, lyric layout line by line) through a
`validate` callable. Problems carry the jobs file's line number, the field and the message, so one report
fixes a whole file.

Lines end at "\n" (or "\r\n") only: U+2028, U+2029 and the other separators `str.splitlines` knows are
ordinary characters inside a JSON string. Whatever a line holds (nesting thousands deep, NaN, Infinity,
1e999) is that line's problem, never a traceback.
"""

from __future__ import annotations

import json
import math
import re
import stat
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.request import Reference, SongRequest, Style
from engine.textfile import TextFileError, describe_mode, read_text_file

KEYS = frozenset({"id", "lyrics", "style", "duration", "seed", "variations", "steps", "cfg", "formats", "edit",
                  "best_of"})
REQUIRED = ("id", "style", "duration")
STYLE_KEYS = frozenset({"audio", "embedding"})
EDIT_KEYS = frozenset({"song", "segments"})
LYRIC_SUFFIXES = (".lrc", ".txt")
JOBS_FILE_LIMIT = 32 * 1024 * 1024  # inline lyrics make lines long; a jobs file this big is a wrong file
# Ids name folders: no separators, no dot-files (our temporaries are dot-files), nothing a shell mangles.
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # always fullmatch: `$` also matches before "\n"
ID_RULE = "1-100 of letters, digits, '.', '_', '-', starting with a letter or digit"
MAX_DEPTH = 8  # a job nests 4 deep ({"edit": {"segments": [[a, b]]}}); far deeper is a wrong file


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
    best_of: int | None = None  # N variations, each heard by the lyrics check; the manifest picks the lowest PER


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
    # The jobs file may be a pipe the user named (`<(...)`); the files its lines name may not.
    return read_text_file(path, limit=JOBS_FILE_LIMIT, allow_pipe=True).text


def parse_jobs(text: str, base_dir: Path, validate: Callable[[SongRequest], list[Any]] | None = None,
               best_of: int | None = None) -> ParsedJobs:
    """Every job line checked; `validate(request)` returns the engine's problems (`engine.request.Problem`).
    `best_of`: `--best-of N`, for the lines without their own "best_of".

    Relative paths in a job are relative to `base_dir` (the jobs file's folder), so a jobs file and its
    lyrics travel together. Every line of a duplicated id is invalid: which one was meant is unknowable.
    """
    problems: list[JobProblem] = []
    jobs: list[RenderJob] = []
    lines: dict[int, str | None] = {}
    seen: dict[str, list[int]] = {}
    for number, raw_line in enumerate(split_lines(text), start=1):
        if not raw_line.strip(_JSON_SPACE):
            continue
        job, line_problems = _parse_line(raw_line, number, base_dir, best_of)
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


_JSON_SPACE = " \t\r\n"  # the only whitespace JSON has


def split_lines(text: str) -> list[str]:
    """The jobs file's lines: split at "\n" only, a "\r" before it dropped (never at U+2028 and the
    other line boundaries `str.splitlines` uses, which JSON allows raw inside strings)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line; it starts no new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _load(raw_line: str) -> Any:
    """json.loads of one line; ValueError (with a sentence) for anything that is not a usable JSON line."""
    try:
        return json.loads(raw_line)
    except RecursionError:
        raise ValueError(f"nested too deeply (a job line nests at most {MAX_DEPTH} levels)") from None


def _depth_problem(obj: Any) -> str | None:
    """Iteratively (no recursion), whether `obj` nests deeper than MAX_DEPTH."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} levels deep; a job line needs at most 4"
            children = value.values() if isinstance(value, dict) else value
            stack.extend((c, depth + 1) for c in children)
    return None


def _non_finite(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every NaN, Infinity or overflowing number (1e999) anywhere in a job."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [(str(k), v) for k, v in obj.items()]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            out.append((where, f"{value!r} is not a finite number (JSON has no NaN or Infinity, and "
                               "1e999 overflows); give a plain number"))
        elif isinstance(value, dict):
            stack.extend((f"{where}.{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return sorted(out)


def _id_problem(value: Any) -> str | None:
    """Why `value` cannot name a job's folder, naming the rule it breaks (None: usable)."""
    if not isinstance(value, str):
        return f"{value!r} is not a usable folder name: a string of {ID_RULE}"
    bad = next((c for c in value if unicodedata.category(c)[0] == "C"), None)
    if bad is not None:
        kind = "control" if unicodedata.category(bad) == "Cc" else "invisible"
        return (f"{value!r} holds the {kind} character U+{ord(bad):04X}; ids are {ID_RULE}, "
                "with no control or invisible characters (newlines, tabs, ...)")
    if not value:
        return f"is empty; ids are {ID_RULE}"
    if len(value) > 100:
        return f"is {len(value)} characters long; ids are {ID_RULE}"
    if not value[0].isascii() or not value[0].isalnum():
        return f"{value!r} starts with {value[0]!r}; ids are {ID_RULE}"
    if not ID_RE.fullmatch(value):
        odd = next(c for c in value if not (c.isascii() and (c.isalnum() or c in "._-")))
        return f"{value!r} holds {odd!r}, which is not allowed in a folder name; ids are {ID_RULE}"
    return None


def _field(name: str) -> str:
    # The engine names a text style "style.text"; in a jobs file it is the plain `style` string.
    return "style" if name == "style.text" else name


def _loose_id(raw_line: str) -> str | None:
    try:
        obj = _load(raw_line)
    except ValueError:
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) and value else None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_line(raw_line: str, n: int, base: Path, best_of: int | None = None) -> tuple[RenderJob | None, list[JobProblem]]:
    try:
        obj = _load(raw_line)
    except ValueError as exc:
        return None, [JobProblem(n, None, "json", f"not valid JSON: {exc}")]
    deep = _depth_problem(obj)
    if deep is not None:
        return None, [JobProblem(n, None, "json", deep)]
    if not isinstance(obj, dict):
        return None, [JobProblem(n, None, "json", f"a job is a JSON object, got {type(obj).__name__}")]
    job_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    out: list[JobProblem] = []
    non_finite = _non_finite(obj)
    if non_finite:  # every later check reads numbers: none of them may see NaN or Infinity
        return None, [JobProblem(n, job_id, where, message) for where, message in non_finite]

    def bad(name: str, message: str) -> None:
        out.append(JobProblem(n, job_id, name, message))

    unknown = sorted(set(obj) - KEYS)
    if unknown:
        bad("keys", f"unknown key(s) {unknown}; allowed: {sorted(KEYS)}")
    for key in REQUIRED:
        if key not in obj:
            bad(key, "missing (required)")
    id_problem = _id_problem(obj["id"]) if "id" in obj else None
    if id_problem is not None:
        bad("id", id_problem)
    if "duration" in obj and not _is_number(obj["duration"]):
        bad("duration", f"a number of seconds, got {obj['duration']!r}")
    for key in ("seed", "variations", "steps", "best_of"):
        if key in obj and not _is_int(obj[key]):
            bad(key, f"a whole number, got {obj[key]!r}")
    best = _best_of(obj, best_of, bad)
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
    if best is not None:
        kwargs["variations"] = best
    request = SongRequest(lyrics=lyrics, style=style, duration=obj["duration"], formats=tuple(formats),
                          edit=edit, title=str(job_id), **kwargs)
    return RenderJob(str(job_id), n, request, obj, files, best), out


def _best_of(obj: dict[str, Any], default: int | None, bad: Callable[[str, str], None]) -> int | None:
    """"best_of": N renders N variations (each checked by ear); the line's own value, else --best-of."""
    from device_worker.controls import VARIATIONS

    value = obj.get("best_of", default)
    if value is None or not _is_int(value):
        return None
    if not VARIATIONS.lo <= value <= VARIATIONS.hi:
        bad("best_of", f"{value} is out of range: {VARIATIONS.range_text}")
        return None
    if "variations" in obj and _is_int(obj["variations"]) and obj["variations"] != value and "best_of" in obj:
        bad("best_of", f"best_of {value} renders {value} variations; drop \"variations\" ({obj['variations']})")
        return None
    return int(value)


def _file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as an input file (None: a regular file). Never opens it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"file not found: {path}"
    except OSError as exc:
        return f"{path}: cannot be read: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"{path}: is {describe_mode(mode)}, not a regular file"
    return None


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
        problem = _file_problem(resolved)
        if problem is not None:
            bad(f"style.{key}", problem)
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
    problem = _file_problem(resolved)
    if problem is not None:
        bad("edit.song", problem)
        return None
    files["edit.song"] = str(resolved)
    return Reference.edit(str(resolved), segments)
