"""`python -m device_worker.backends.ttnn.warm`: compile every shape a song can need, on the card.

Run in the worker's environment (Python 3.12 + ttnn). Compiled kernels land in the persistent kernel
cache (TT_METAL_CACHE, see device.py), so a worker started later skips the compile (the port measured
33.9 s cold vs 0.33 s warm for a VAE window). Prints one JSON line per event on stdout (`studio
warm-cache` reads them) and logs on stderr. Exit codes: 0 done, 3 no ttnn here, 4 no card, 1 other.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from device_worker.backends.ttnn.plan import WarmShape, warm_plan
from device_worker.backends.ttnn.runtime import TtnnUnavailable


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m device_worker.backends.ttnn.warm", description=__doc__.splitlines()[0])
    p.add_argument("--dit", required=True, help="DiT checkpoint folder or cfm_model.pt")
    p.add_argument("--vae", required=True, help="VAE checkpoint (vae_model.pt)")
    p.add_argument("--device", default="0", help="card index")
    p.add_argument("--min-s", type=int, default=96, help="shortest song in seconds")
    p.add_argument("--max-s", type=int, default=285, help="longest song in seconds")
    p.add_argument("--windows", default="128", help="VAE window lengths in latent frames, comma separated")
    p.add_argument("--seq", default="", help="compile these sequence lengths instead of the song buckets")
    p.add_argument("--root", default=None, help="cache root (default DRS_TTNN_CACHE or ~/.cache/...)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level="INFO", stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    windows = tuple(int(w) for w in args.windows.split(",") if w.strip())
    try:
        from device_worker.backends.ttnn.backend import TtnnBackend
    except TtnnUnavailable as exc:
        emit(event="error", reason="no-ttnn", message=str(exc))
        return 3
    be = TtnnBackend(args.device, root=args.root, vae_windows=(), warm="none")
    try:
        be.load(args.dit, args.vae, lambda stage, frac: emit(event="load", stage=stage, fraction=frac))
    except RuntimeError as exc:
        if "open Tenstorrent card" in str(exc) or "No chips" in str(exc):
            emit(event="error", reason="no-card", message=str(exc))
            return 4
        raise
    try:
        batch = 2 if be.prec.batch_branches else 1  # both guidance branches: one batch-2 program
        if args.seq:
            plan = [WarmShape("vae", w) for w in windows]
            plan += [WarmShape("dit", int(s), batch) for s in args.seq.split(",") if s.strip()]
        else:
            plan = warm_plan(args.min_s, args.max_s, batch=batch, windows=windows)
        emit(event="start", shapes=[s.key for s in plan], kernel_cache=str(be.settings.kernel_cache))
        started = time.perf_counter()
        for i, shape in enumerate(plan):
            seconds = be.warm(shape)
            emit(event="shape", index=i + 1, total=len(plan), key=shape.key, kind=shape.kind, length=shape.length,
                 batch=shape.batch, seconds=round(seconds, 3))
        record = be.write_warm_record()  # the next worker reports these shapes as kernel-cached
        emit(event="done", seconds=round(time.perf_counter() - started, 3), warm_shapes=be.warm_shapes(),
             record=str(record))
        return 0
    finally:
        be.close()


if __name__ == "__main__":
    sys.exit(main())
