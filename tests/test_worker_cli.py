"""`studio worker` and `python -m device_worker`: flags, refusals, and the import boundary."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from studio.cli_worker import worker


def test_help_lists_the_flags_and_examples():
    out = CliRunner().invoke(worker, ["--help"]).output
    for flag in ("--backend", "--device", "--bind", "--dit", "--vae", "--secret-file", "--policy", "--max-jobs"):
        assert flag in out
    assert "studio worker --device cuda:0" in out


def test_non_loopback_tcp_without_secret_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "v.pt").write_bytes(b"")
    res = CliRunner().invoke(worker, ["--bind", "tcp://0.0.0.0:5999", "--dit", str(tmp_path / "d"),
                                      "--vae", str(tmp_path / "v.pt"), "--lock-dir", str(tmp_path)])
    assert res.exit_code == 2, res.output


def test_device_worker_imports_nothing_from_engine_or_studio():
    code = ("import sys, device_worker.__main__, device_worker.worker, device_worker.core, "
            "device_worker.backends.torch_backend; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('engine', 'studio')]; "
            "assert not bad, bad; assert 'torch' not in sys.modules, 'torch loads only with the weights'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_engine_remote_does_not_import_torch():
    code = "import sys, engine.remote; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
