"""What the studio benches share: a `studio serve --model test` process on a free loopback port, and RSS."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb(pid: int) -> float:
    """Resident memory of a process, MB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def serve_test_studio(prefix: str, frames: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """Start the studio with the test model in a fresh temporary data folder: (process, url, folder).
    `frames` crops each song to that many latent frames (`--test-crop-frames`), for many songs quickly."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "GRADIO_TEMP_DIR": str(tmp / "gradio"),
           "STUDIO_LOG_LEVEL": "WARNING"}
    argv = [sys.executable, "-m", "studio.cli", "serve", "--model", "test", "--port", str(port),
            "--data-dir", str(tmp / "data"), "--threads", "1"]
    if frames is not None:
        argv += ["--test-crop-frames", str(frames)]
    with open(tmp / "serve.log", "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}/", tmp
