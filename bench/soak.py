"""Memory soak: 50 consecutive songs through the real engine; engine and worker RSS after every song.

    .venv/bin/python bench/soak.py [--songs 50] [--frames 160] [--steps 4] [--threads 1]

One engine, one local CPU worker (TEST MODE: the tiny reference DiT/VAE, the test model's tiny MuQ-MuLan so
text and audio styles run the worker's `style` op, the reference g2p vocab so lyrics are tokenised). Songs
vary: lyrics / instrumental, new and repeated style texts, embedding and audio styles, edits of the last
take, two variations, four format mixes. Prints RSS every 5 songs, the least-squares slope over the last
40 songs, the peaks, tracemalloc's top growth in the engine process, the worker's RSS after load vs the
weights it loaded, and the studio's RSS without weights (a subprocess that imports and builds the app).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

from engine_setup import REFERENCE, ROOT, make_config, style_file

from engine.config import Models
from engine.engine import Engine
from engine.events import AudioChunk, Done
from engine.request import Reference, SongRequest, Style
from studio.testmodel import ensure_test_models

FLAT_MIB_PER_SONG = 0.1  # below this, 50 songs grow < 5 MiB: allocator noise, not a per-song leak
FORMATS = (("wav",), ("flac",), ("mp3", "ogg"), ("flac", "mp3", "ogg"))


def vm(pid: int | str) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB from /proc: psutil is not a dependency."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def slope(ys: list[float]) -> float:
    """Least-squares slope per index (MiB per song)."""
    n = len(ys)
    mx, my = (n - 1) / 2, sum(ys) / n
    return sum((i - mx) * (y - my) for i, y in enumerate(ys)) / sum((i - mx) ** 2 for i in range(n))


def size_of(path: str | None) -> int:
    """Bytes on disk of a checkpoint file or folder (all files in it)."""
    if not path:
        return 0
    p = Path(path)
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size


def request(i: int, steps: int, embedding: str, last_wav: str | None) -> SongRequest:
    """Song i of the soak: cycles through the per-job paths the engine and worker keep state for."""
    lines = [f"[00:{1 + 2 * k:02d}.00]song {i} line {k} under neon light" for k in range(3)]
    lyrics = "" if i % 2 else "\n".join([*lines, "[00:07.00]"])  # the last timed line is the end marker
    kind = i % 4
    if kind == 0:
        style = Style(text=f"warm jazz, piano, take {i}")  # new text: a fresh embedding every time
    elif kind == 1:
        style = Style(text="lofi hip hop, rainy night")  # same text: the style cache answers
    elif kind == 2 and last_wav:
        style = Style(audio=last_wav)  # the last take as a reference recording: style op on audio
    else:
        style = Style(embedding=embedding)
    edit = Reference.edit(last_wav, [[0.5, 1.5]]) if i % 10 == 7 and last_wav else None
    return SongRequest(lyrics=lyrics, style=style, steps=steps, seed=i, edit=edit, variations=2 if i % 10 == 3 else 1,
                       formats=FORMATS[i % len(FORMATS)], title=f"soak {i}")


def studio_rss() -> str:
    """RSS of a fresh process that imports what `studio serve` imports plus the engine, builds the page and
    launches it on 127.0.0.1 (no weights, no worker); it reports its own VmHWM and whether torch came in."""
    code = """
import os, sys, tempfile
from pathlib import Path
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
import studio.cli, studio.cli.serve
from studio.app import build_app, launch
from studio.config import StudioConfig
from studio.services import Services
from studio.store import Store
import engine.engine, engine.pool
def vm():
    f = dict(l.split(":", 1) for l in Path("/proc/self/status").read_text().splitlines() if ":" in l)
    return int(f["VmRSS"].split()[0]) / 1024, int(f["VmHWM"].split()[0]) / 1024
rss0, hwm0 = vm()
data = Path(tempfile.mkdtemp(prefix="drs-soak-studio-"))
svc = Services(Store(data), StudioConfig(data))
demo = build_app(svc)
launch(demo, svc, host="127.0.0.1", port=None, block=False)
rss1, hwm1 = vm()
print(f"SOAK {rss0:.0f} {hwm0:.0f} {rss1:.0f} {hwm1:.0f} {'torch' in sys.modules}")
demo.close(); svc.close()
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180,
                         env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    if out.returncode != 0:
        return f"studio process failed: {out.stderr[-1500:]}"
    line = next(x for x in out.stdout.splitlines() if x.startswith("SOAK "))  # gradio prints too
    rss0, hwm0, rss1, hwm1, torch = line.split()[1:]
    verdict = "PASS" if float(hwm1) < 500 else "FAIL"
    return (f"studio process (imports: RSS {rss0} MiB, HWM {hwm0} MiB; page built + launched on 127.0.0.1: "
            f"RSS {rss1} MiB, HWM {hwm1} MiB; torch imported: {torch}) -> {verdict} target < 500 MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--songs", type=int, default=50)
    ap.add_argument("--frames", type=int, default=160)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads in the worker")
    ap.add_argument("--no-tracemalloc", action="store_true")
    args = ap.parse_args()
    cfg = make_config(args.frames, args.threads, policy="fair")
    tiny: Models = cfg.models
    cfg = replace(cfg, models=replace(tiny, style=ensure_test_models().style,
                                      vocab=str(REFERENCE / "g2p" / "g2p" / "vocab.json")))
    t_start = time.perf_counter()
    with Engine(cfg) as engine:
        wpid = engine.pool.worker_info()[0]["pid"]
        w_loaded, _ = vm(wpid)
        e_loaded, _ = vm("self")
        weights = size_of(cfg.models.dit("base")) + size_of(cfg.models.vae) + size_of(cfg.models.style)
        embedding = style_file(cfg.data_dir)
        engine.submit(SongRequest(style=Style(embedding=embedding), steps=2, seed=0)).result(300)  # warm-up
        rows: list[tuple[int, float, float, float, int, float]] = []
        last_wav: str | None = None
        snap0 = None
        for i in range(args.songs):
            if i == 10 and not args.no_tracemalloc:  # after the first formats/styles have been touched once
                tracemalloc.start(1)
                snap0 = tracemalloc.take_snapshot()
            t0 = time.perf_counter()
            job = engine.submit(request(i, args.steps, embedding, last_wav))
            chunks = sum(isinstance(e, AudioChunk) for e in job)  # subscribe, like the page does
            done = job.wait(300)
            if not isinstance(done, Done):
                sys.exit(f"song {i} ended with {done}")
            last_wav = str(done.takes[0].files["wav"])
            del job, done
            gc.collect()
            # tracemalloc's own tables live in this RSS too; leave them out so they don't pose as a leak
            e_rss = vm("self")[0] - tracemalloc.get_tracemalloc_memory() / 2**20
            w_rss, _ = vm(wpid)
            rows.append((i, e_rss, w_rss, time.perf_counter() - t0, len(gc.get_objects()), chunks))
        growth = []
        if snap0 is not None:
            growth = tracemalloc.take_snapshot().compare_to(snap0, "lineno")[:8]
            tracemalloc.stop()
        e_hwm, w_hwm = vm("self")[1], vm(wpid)[1]
        assert engine.pool.worker_info()[0]["pid"] == wpid, "the worker restarted mid-soak"
    wall = time.perf_counter() - t_start

    print(f"\n{args.songs} songs, {args.steps} steps, {args.frames} frames, worker threads {args.threads}, "
          f"wall {wall:.0f} s (incl. start-up)")
    print("engine RSS excludes tracemalloc's own memory (get_tracemalloc_memory)")
    print("| song | engine RSS MiB | worker RSS MiB | song s | gc objects |\n|---:|---:|---:|---:|---:|")
    for i, e, w, s, objs, _ in rows:
        if i % 5 == 4 or i == 0:
            print(f"| {i + 1} | {e:.1f} | {w:.1f} | {s:.2f} | {objs} |")
    tail = rows[-40:]
    es, ws = slope([r[1] for r in tail]), slope([r[2] for r in tail])
    os_ = slope([float(r[4]) for r in tail])
    # RSS moves in allocator steps of several MiB; a step near the middle tilts a 40-point fit, so also
    # compare medians of songs 11-20 and of the last 10 (robust to one step, not to steady growth)
    med = {k: (statistics.median(r[k] for r in rows[10:20]), statistics.median(r[k] for r in rows[-10:]))
           for k in (1, 2)}
    print(f"\nslope over the last {len(tail)} songs: engine {es:+.3f} MiB/song, worker {ws:+.3f} MiB/song, "
          f"gc objects {os_:+.1f}/song")
    print(f"median RSS songs 11-20 -> last 10: engine {med[1][0]:.1f} -> {med[1][1]:.1f} MiB, "
          f"worker {med[2][0]:.1f} -> {med[2][1]:.1f} MiB")
    print(f"peak RSS (VmHWM): engine {e_hwm:.1f} MiB, worker {w_hwm:.1f} MiB; after load: engine {e_loaded:.1f} MiB, "
          f"worker {w_loaded:.1f} MiB")
    if growth:
        print("\ntracemalloc, engine process, top growth songs 11..50 (file:line, size diff, count diff):")
        for st in growth:
            print(f"  {st.traceback[0].filename.replace(str(ROOT) + '/', '')}:{st.traceback[0].lineno} "
                  f"{st.size_diff / 1024:+.1f} KiB {st.count_diff:+d}")
    print("\nverdicts:")
    print(f"  flat threshold {FLAT_MIB_PER_SONG} MiB/song (<5 MiB over 50 songs; RSS moves in allocator-arena "
          "steps, so a real per-song leak of even one decoded take (~1-5 MiB here) shows well above it)")
    for name, s, (a, b) in (("engine", es, med[1]), ("worker", ws, med[2])):
        print(f"  {name}: no leak across {args.songs} songs -> {'PASS' if abs(s) < FLAT_MIB_PER_SONG else 'FAIL'} "
              f"(slope {s:+.3f} MiB/song; median growth {b - a:+.1f} MiB)")
    limit = weights / 2**20 + 1024
    print(f"  worker host RSS after load {w_loaded:.1f} MiB, peak {w_hwm:.1f} MiB vs weights {weights / 2**20:.1f} MiB "
          f"+ 1024 MiB = {limit:.1f} MiB -> {'PASS' if w_hwm <= limit else 'FAIL'} (peak used; overhead above "
          f"weights: {w_hwm - weights / 2**20:.0f} MiB)")
    print(f"  engine process (no weights) peak {e_hwm:.1f} MiB -> {'PASS' if e_hwm < 500 else 'FAIL'} target < 500 MB")
    print("  " + studio_rss())
    print("  wire + worker path <= 3% of song wall time: not measured here (songs of a few frames are all fixed "
          "cost; bench/worker_overhead.py measures it)")


if __name__ == "__main__":
    main()
