"""Progress on stderr: an overall bar and the current job's bar (steps, then decode windows, with ETAs).

On a terminal the two bars are redrawn in place and finished jobs scroll above them. Anywhere else (a
log file of an overnight run, a test) it writes plain lines: each job's start and end, and its progress
at most every `every_s` seconds, so a log stays readable and greppable. `--quiet` writes nothing.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

BAR = 24
DRAW_S = 0.1


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(max(seconds, 0) + 0.5)
    h, rem = divmod(seconds, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60:d}:{rem % 60:02d}"


def bar(frac: float, width: int = BAR) -> str:
    filled = int(round(max(0.0, min(frac, 1.0)) * width))
    return "#" * filled + "-" * (width - filled)


@dataclass
class JobState:
    id: str
    takes: int
    take: int = 0
    phase: str = "queued"  # queued | preparing | steps | decoding
    k: int = 0
    total: int = 0
    eta_s: float | None = None
    started: float = 0.0

    def fraction(self) -> float:
        # Steps are most of a take's time on real hardware; decode windows the rest.
        part = {"steps": 0.85 * self.k / max(self.total, 1),
                "decoding": 0.85 + 0.15 * self.k / max(self.total, 1)}.get(self.phase, 0.0)
        return (self.take + part) / max(self.takes, 1)

    def job_eta(self, now: float | None = None) -> float | None:
        """The whole job's time left: this take's ETA plus the takes after it at the pace so far."""
        if self.eta_s is None:
            return None
        done = self.fraction() * self.takes
        elapsed = (time.monotonic() if now is None else now) - self.started
        per_take = elapsed / done if done > 0.05 else 0.0
        return self.eta_s + (self.takes - self.take - 1) * per_take

    def describe(self) -> str:
        take = f" take {self.take + 1}/{self.takes}" if self.takes > 1 else ""
        what = {"steps": f"step {self.k}/{self.total}", "decoding": f"decode window {self.k}/{self.total}"}
        return f"{self.id}{take}: {what.get(self.phase, self.phase)}"


class Progress:
    def __init__(self, total: int, *, stream: TextIO | None = None, quiet: bool = False,
                 tty: bool | None = None, every_s: float = 5.0, draw_s: float = DRAW_S) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty() if tty is None else tty
        self.total = total  # jobs this run renders (skipped ones are not counted)
        self.finished = 0
        self.started = 0  # jobs started: pipelined jobs start before the ones ahead have finished
        self.every_s, self.draw_s = every_s, draw_s
        self.jobs: dict[str, JobState] = {}  # started, not ended (insertion order = start order)
        self._job_times: list[float] = []
        self._drawn = 0
        self._last_line = 0.0
        self._last_draw = 0.0
        self._t0 = time.monotonic()

    # -- messages ---------------------------------------------------------------------------------
    def message(self, text: str) -> None:
        """A line that stays (validation report, a finished job)."""
        if self.quiet:
            return
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()
        self._draw()

    # -- job lifecycle ----------------------------------------------------------------------------
    def start(self, job_id: str, takes: int) -> None:
        """`job_id` is on its way (pipelined: the next job may start while the last one is written)."""
        self.jobs[job_id] = JobState(job_id, takes, started=time.monotonic())
        self.started += 1
        if not self.tty:
            self.message(f"[{self.started}/{self.total}] {job_id}: started")
        self._draw()

    @property
    def current(self) -> JobState | None:
        """The job shown in the second bar: the oldest one not ended (with `fifo`, the one on the card;
        later ones are already placed on a worker but wait their turn)."""
        return next(iter(self.jobs.values()), None)

    def event(self, job_id: str, e: Any) -> None:
        from engine import events as ev

        st = self.jobs.get(job_id)
        if st is None:
            return
        if isinstance(e, ev.Preparing):
            st.phase = f"preparing {e.what}"
        elif isinstance(e, ev.Running):
            st.take, st.phase, st.k = e.take, f"on {e.worker}", 0
        elif isinstance(e, (ev.Step, ev.Decoding)):
            st.take, st.phase = e.take, "steps" if isinstance(e, ev.Step) else "decoding"
            st.k, st.total, st.eta_s = (e.k, e.total, e.eta_s) if isinstance(e, ev.Step) else (e.j, e.total, e.eta_s)
        else:
            return
        if self.tty:
            if time.monotonic() - self._last_draw >= self.draw_s:  # a terminal needs ~10 frames/s, not every step
                self._draw()
        elif time.monotonic() - self._last_line >= self.every_s and st.phase in ("steps", "decoding"):
            self._last_line = time.monotonic()
            self.message(f"  {st.describe()}  ETA {fmt_s(st.job_eta())}")

    def end(self, job_id: str, outcome: str, detail: str = "") -> None:
        st = self.jobs.pop(job_id, None)
        took = time.monotonic() - st.started if st is not None else None
        if outcome == "done" and took is not None:
            self._job_times.append(took)
        self.finished += 1
        mark = {"done": "ok", "failed": "FAILED", "cancelled": "cancelled"}.get(outcome, outcome)
        tail = f" ({fmt_s(took)})" if took is not None else ""
        self.message(f"[{self.finished}/{self.total}] {job_id}: {mark}{tail}" + (f": {detail}" if detail else ""))

    def close(self) -> None:
        self._clear()

    # -- drawing ----------------------------------------------------------------------------------
    def overall_eta(self) -> float | None:
        if not self._job_times:
            return None
        per_job = sum(self._job_times) / len(self._job_times)
        left = max(self.total - self.finished - len(self.jobs), 0) * per_job
        for st in self.jobs.values():
            eta = st.job_eta()
            left += eta if eta is not None else per_job
        return left

    def _lines(self) -> list[str]:
        frac = (self.finished + sum(st.fraction() for st in self.jobs.values())) / max(self.total, 1)
        lines = [f"all  [{bar(frac)}] {self.finished}/{self.total} jobs  ETA {fmt_s(self.overall_eta())}"]
        st = self.current
        if st is not None:
            lines.append(f"job  [{bar(st.fraction())}] {st.describe()}  ETA {fmt_s(st.job_eta())}")
        return lines

    def _draw(self) -> None:
        if self.quiet or not self.tty:
            return
        self._clear()
        lines = self._lines()
        self.stream.write("\n".join(line[:160] for line in lines))
        self.stream.flush()
        self._drawn = len(lines)
        self._last_draw = time.monotonic()

    def _clear(self) -> None:
        if self.tty and self._drawn:
            # Up to the first bar line, then clear to the end of the screen.
            self.stream.write("\r" + "\x1b[1A" * (self._drawn - 1) + "\x1b[J")
            self._drawn = 0
