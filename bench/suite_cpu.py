"""Where a command's CPU goes, by kind of process: run it (default: the README's test command) while the CPU
ticks of every process on the machine are read from /proc twice a second (so run it on an otherwise quiet
machine), then print core-seconds per kind, the wall time and the cores kept busy on average. Linux only.

    .venv/bin/python bench/suite_cpu.py                        # the whole suite, as the README runs it
    .venv/bin/python bench/suite_cpu.py -- .venv/bin/python -m pytest -q -n 0 tests/studio   # anything

What it shows is what a faster suite must cut: a process that lives less than half a second between two
reads is missed, so short-lived helpers read low.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter

KINDS = (  # first match wins: a studio's data folder under pytest's temp names "pytest" too
    ("device worker", ("-m device_worker", "drs-ray-")),
    ("studio serve", ("studio.cli serve", "bin/studio serve")),
    ("other studio CLI", ("studio.cli", "bin/studio")),
    ("audio encoder child", ("engine.encoder",)),
    ("chromium", ("chromium", "chrome")),
    ("playwright driver", ("playwright",)),
    ("ray", ("ray::", "/ray/", "raylet", "gcs_server")),
    ("postgres", ("postgres",)),
    ("test process (pytest, xdist)", ("pytest", "execnet", "exec(eval(sys.stdin")),
    ("other python", ("python",)),
)


def kind(cmdline: str) -> str:
    for name, marks in KINDS:
        if any(m in cmdline for m in marks):
            return name
    return "other"


def read_all() -> dict[int, tuple[int, int, str]]:
    """pid -> (start tick, user+system ticks, command line), for every process readable now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(d)] = (int(fields[19]), int(fields[11]) + int(fields[12]), cmd)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs="*", help="the command to run (after --); default: python -m pytest -q")
    ap.add_argument("--every", type=float, default=0.5, help="seconds between reads of /proc")
    args = ap.parse_args()
    command = args.command or [sys.executable, "-m", "pytest", "-q"]
    tick = os.sysconf("SC_CLK_TCK")
    seen = {pid: (start, ticks) for pid, (start, ticks, _) in read_all().items()}  # not ours: before the run
    totals: Counter[str] = Counter()
    started: Counter[str] = Counter()  # processes of each kind seen for the first time during the run
    t0 = time.monotonic()
    proc = subprocess.Popen(command)
    while True:
        done = proc.poll() is not None
        for pid, (start, ticks, cmd) in read_all().items():
            before = seen.get(pid)
            base = before[1] if before and before[0] == start else 0  # a reused pid is a new process
            if not (before and before[0] == start):
                started[kind(cmd)] += 1
            if ticks > base:
                totals[kind(cmd)] += ticks - base
            seen[pid] = (start, ticks)
        if done:
            break
        time.sleep(args.every)
    wall = time.monotonic() - t0
    busy = sum(totals.values()) / tick
    print(f"\n{'core-s':>8}  {'started':>7}  kind of process   (wall {wall:.1f} s, exit {proc.returncode})")
    for name, ticks in totals.most_common():
        print(f"{ticks / tick:8.1f}  {started[name]:7d}  {name}")
    print(f"{busy:8.1f}  in all: {busy / wall:.2f} cores busy on average, of {len(os.sched_getaffinity(0))}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
