"""`studio worker` and `python -m device_worker`: flags, refusals, and the import boundary."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from device_worker.__main__ import build_parser
from device_worker.config import OPTIONS, WorkerConfig, flag
from engine.worker_client import Worker
from studio.cli.worker import worker


def test_help_lists_the_flags_and_examples():
    out = CliRunner().invoke(worker, ["--help"]).output
    for f in OPTIONS:  # every option of the one declaration, on both command lines
        assert flag(f) in out
        assert flag(f) in build_parser().format_help()
    assert "studio worker --device cuda:0" in out


def test_the_engine_starts_a_worker_with_exactly_its_configuration(tmp_path):
    w = Worker(dit="ckpt/dit", vae="v.pt", device="cuda:1", precision="float16", half_mode="upstream", policy="fifo",
               max_jobs=3, threads=2, lock_dir=str(tmp_path), style="mulan", secret_file=None)
    argv = w.argv()
    assert argv[1:3] == ["-m", "device_worker"]
    parsed = WorkerConfig(**vars(build_parser().parse_args(argv[3:])))
    assert parsed == WorkerConfig(**{**w.config.__dict__, "parent_pid": os.getpid()})
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_job'"):
        Worker(dit="d", vae="v", max_job=3)  # a typo is refused, not dropped
    with pytest.raises(ValueError, match="--precision must be one of"):
        Worker(dit="d", vae="v", precision="fp8")


def test_bad_option_values_are_usage_errors(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "v.pt").write_bytes(b"")
    res = CliRunner().invoke(worker, ["--bind", "ipc:///tmp/x.sock", "--dit", str(tmp_path / "d"),
                                      "--vae", str(tmp_path / "v.pt"), "--max-jobs", "0"])
    assert res.exit_code == 2 and "--max-jobs must be at least 1" in res.output


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
    code = "import sys, engine.worker_client; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_auto_precision_is_half_where_it_is_fast_and_exact_elsewhere():
    from device_worker.config import resolve_precision

    assert resolve_precision("torch", "cuda:1", "auto") == "bfloat16"
    assert resolve_precision("torch", "mps", "auto") == "float16"
    assert resolve_precision("torch", "cpu", "auto") == "float32"  # emulated bfloat16 is slower than float32
    assert resolve_precision("torch", "cpu", "auto", cpu_bf16=True) == "bfloat16"  # AMX / AVX512-BF16
    assert resolve_precision("ttnn", "0", "auto", cpu_bf16=True) == "float32"  # the card's DRPrecision decides
    assert resolve_precision("torch", "cuda:0", "float32") == "float32"  # asked for: kept
    assert resolve_precision("torch", "cpu", "float32", cpu_bf16=True) == "float32"
    assert WorkerConfig().precision == "auto"


def test_the_cpus_bfloat16_answer_matches_its_flags():
    """What the worker reads (torch's own CPU probes) agrees with the kernel's view of this CPU."""
    from pathlib import Path

    from device_worker.backends.torch_backend import cpu_has_native_bf16

    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        pytest.skip("no /proc/cpuinfo to compare with (not Linux)")
    flags = set(cpuinfo.read_text().split())
    assert cpu_has_native_bf16() == bool(flags & {"amx_bf16", "amx_tile", "avx512_bf16"})


def test_warm_cache_for_cuda_names_a_missing_gpu(reference_dir, tmp_path, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: tests/model/test_cuda.py covers the compiled path")
    from studio.cli.warm import warm_cache

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    res = CliRunner().invoke(warm_cache, ["--device", "cuda:0", "--dit", str(reference_dir / "dit-tiny-base"),
                                          "--vae", str(reference_dir / "vae-tiny" / "vae_model.pt")])
    assert res.exit_code == 1, res.output
    assert "warm-cache failed" in res.output and "no CUDA GPU" in res.output, res.output
