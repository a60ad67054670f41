"""Songs per hour on 1, 2 and 3 Ray nodes, and Ray placement against the local pool on one node, in one run.

A throwaway `ray.cluster_utils.Cluster` on loopback (as tests/scale/test_ray_workers.py), one `benchcard`
resource per node, one CPU worker per node on the tiny reference test model (crop 96 frames). One engine
sees the cluster grow from 1 to 3 nodes; a second engine with one local subprocess worker is the
baseline. The one-node comparison alternates local and Ray batches (`--rounds`) so a machine shared
with others drifts both alike. Prints a table and one JSON line.

What it measures on a small machine: the cost of Ray placement (the same worker, reached through an
actor and tcp instead of a local subprocess and ipc) and the memory a Ray node costs. Extra nodes on
one host share its cores, so on a 2-core machine they cannot add throughput; on real hosts each node
brings its own card.

    .venv/bin/python bench/scaleout.py [--songs 12] [--steps 24] [--rounds 2] [--threads 1]
"""

from __future__ import annotations

import os

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback-only node addresses (read at import)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import argparse
import json
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REFERENCE = ROOT.parent / "shared" / "reference" / "diffrhythm"
RESOURCE = "benchcard"


def _rss_mib(temp_dir: str) -> dict[str, float]:
    """Resident memory of the cluster's processes by kind (RSS; shared pages count in each process)."""
    out = subprocess.run(["ps", "-ewwo", "rss,args"], capture_output=True, text=True).stdout
    kinds: dict[str, float] = {"ray (raylets, gcs, agents)": 0.0, "actors": 0.0, "device workers": 0.0}
    for line in out.splitlines()[1:]:
        rss, _, args = line.strip().partition(" ")
        if "drs-ray-" in args and "device_worker" in args:
            kinds["device workers"] += int(rss) / 1024
        elif args.startswith("ray::"):
            kinds["actors"] += int(rss) / 1024
        elif temp_dir in args or "/ray/core/src/ray/" in args:
            kinds["ray (raylets, gcs, agents)"] += int(rss) / 1024
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--songs", type=int, default=12, help="songs per batch")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=2, help="alternating local/Ray batches on one node")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import ray
    from ray.cluster_utils import Cluster

    from engine.config import EngineConfig, Models, WorkerSpec
    from engine.engine import Engine
    from engine.request import SongRequest, Style

    tmp = Path(tempfile.mkdtemp(prefix="scaleout-"))
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    os.environ["RAY_TMPDIR"] = temp_dir
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    np.save(tmp / "style.npy", v / np.linalg.norm(v))
    style = Style(embedding=str(tmp / "style.npy"))
    r = REFERENCE
    models = Models(vae=str(r / "vae-tiny" / "vae_model.pt"), base=str(r / "dit-tiny-base"),
                    full=str(r / "dit-tiny-full"), negative_style=str(r / "vocal.npy"), test=True)

    def config(name: str, **kw) -> EngineConfig:
        return EngineConfig(data_dir=tmp / name, models=models, crop_frames=96, policy="fifo",
                            workers=[WorkerSpec(threads=args.threads)], lock_dir=str(tmp / "locks"), **kw)

    seeds = iter(range(1000, 10**6))

    def batch(engine: Engine) -> float:
        """Wall seconds for `--songs` songs submitted at once."""
        t0 = time.perf_counter()
        jobs = [engine.submit(SongRequest(style=style, steps=args.steps, seed=next(seeds))) for _ in range(args.songs)]
        for job in jobs:
            job.result(600)
        return time.perf_counter() - t0

    node = dict(num_cpus=1, resources={RESOURCE: 1}, node_ip_address="127.0.0.1", object_store_memory=80 << 20)
    cluster = local = remote = None
    rows: list[dict] = []
    try:
        t0 = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False,
                                                                "dashboard_host": "127.0.0.1"})
        head_s = time.perf_counter() - t0
        local = Engine(config("local"))
        t0 = time.perf_counter()
        # The pool's default cluster poll (ray_poll_s, 2 s): a faster one costs the engine CPU on a small host.
        remote = Engine(config("ray", ray=cluster.address, ray_resource=RESOURCE))
        ray_start_s = time.perf_counter() - t0
        batch(local), batch(remote)  # warm: first-song costs (style cache, torch's first calls) out of the way
        local_s, ray_s = [], []
        for _ in range(args.rounds):
            local_s.append(batch(local))
            ray_s.append(batch(remote))
        local.close()
        local = None
        base = statistics.median(ray_s)
        rows.append({"setup": "local pool, 1 worker", "nodes": 1, "wall_s": statistics.median(local_s),
                     "rounds_s": [round(x, 3) for x in local_s]})
        rows.append({"setup": "Ray, 1 node", "nodes": 1, "wall_s": base, "rounds_s": [round(x, 3) for x in ray_s],
                     "memory": _rss_mib(temp_dir)})
        for n in (2, 3):
            cluster.add_node(**node)
            deadline = time.monotonic() + 120
            while sum(w["state"] == "ready" for w in remote.pool.worker_info()) < n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the worker of node {n} did not come up")
                time.sleep(0.1)
            batch(remote)  # the new worker's first song
            rows.append({"setup": f"Ray, {n} nodes", "nodes": n, "wall_s": statistics.median(
                [batch(remote) for _ in range(args.rounds)]), "memory": _rss_mib(temp_dir)})
    finally:
        for engine in (local, remote):
            if engine is not None:
                engine.close()
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(temp_dir, ignore_errors=True)

    local_wall = rows[0]["wall_s"]
    print(f"\n{args.songs} songs of {args.steps} steps per batch, median of {args.rounds}; "
          f"{os.cpu_count()} CPU cores; cluster head up in {head_s:.1f} s, Ray engine ready in {ray_start_s:.1f} s\n")
    print(f"{'setup':<22} {'songs/hour':>11} {'vs 1 Ray node':>14} {'vs local':>9} {'Ray memory MiB':>15}")
    for row in rows:
        row["songs_per_hour"] = round(args.songs / row["wall_s"] * 3600)
        row["vs_1_ray_node"] = round(base / row["wall_s"], 3)
        row["vs_local"] = round(local_wall / row["wall_s"], 3)
        mem = sum(row.get("memory", {}).values())
        print(f"{row['setup']:<22} {row['songs_per_hour']:>11} {row['vs_1_ray_node']:>14.3f} "
              f"{row['vs_local']:>9.3f} {mem:>15.0f}" if mem else
              f"{row['setup']:<22} {row['songs_per_hour']:>11} {row['vs_1_ray_node']:>14.3f} {row['vs_local']:>9.3f} {'-':>15}")
    overhead = rows[1]["wall_s"] / local_wall - 1
    print(f"\nRay placement overhead on one node: {100 * overhead:+.1f}% wall time against the local pool "
          "(target <= 3%)")
    # The spread of the alternating rounds says how much of that figure this machine can resolve.
    for row in rows[:2]:
        lo, hi = min(row["rounds_s"]), max(row["rounds_s"])
        print(f"  {row['setup']}: rounds {lo:.2f}-{hi:.2f} s (spread {100 * (hi - lo) / row['wall_s']:.0f}% of the median)")
    for row in rows[1:]:
        print(f"  {row['setup']}: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in row["memory"].items()))
    print(json.dumps({"songs": args.songs, "steps": args.steps, "rounds": args.rounds, "cores": os.cpu_count(),
                      "overhead_1_node": round(overhead, 4), "rows": rows}))


if __name__ == "__main__":
    main()
