"""Without ttnn (this CI's Python 3.11): everything but the card modules imports, and choosing the ttnn
backend fails in a sentence naming the environment to use. The stand-in is never importable as `ttnn`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from device_worker.backends.ttnn.runtime import ttnn_installed

ROOT = Path(__file__).resolve().parents[2]
HAS_TTNN = ttnn_installed()


def test_ttnn_is_not_importable_here_and_the_stand_in_is_not_it() -> None:
    if HAS_TTNN:
        pytest.skip("a real ttnn is installed in this environment")
    assert "ttnn" not in sys.modules  # the stand-in fixture removed itself after its tests
    with pytest.raises(ModuleNotFoundError):
        import ttnn  # noqa: F401
    assert (ROOT / "tests" / "fake_ttnn" / "__init__.py").is_file()
    assert not (ROOT / "device_worker" / "fake_ttnn").exists() and not (ROOT / "ttnn").exists()


def test_host_side_modules_import_without_ttnn() -> None:
    # a fresh interpreter that fails any attempt to import ttnn
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ttnn' or name.startswith('ttnn.'):\n"
        "            raise ImportError('ttnn imported by ' + repr(sys._getframe(1).f_globals.get('__name__')))\n"
        "sys.meta_path.insert(0, Block())\n"
        "import device_worker, device_worker.worker, device_worker.backends\n"
        "import device_worker.backends.ttnn as p\n"
        "from device_worker.backends.ttnn import plan, precision, convert, reference, reference_vae, runtime\n"
        "print('ok', p.INSTALL_HINT[:10])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr


@pytest.mark.skipif(HAS_TTNN, reason="a real ttnn is installed in this environment")
def test_selecting_the_backend_without_ttnn_names_the_environment() -> None:
    from device_worker.backends import make_backend
    from device_worker.backends.ttnn.runtime import TtnnUnavailable

    sys.modules.pop("device_worker.backends.ttnn.backend", None)
    with pytest.raises(TtnnUnavailable) as exc:
        import device_worker.backends.ttnn.backend  # noqa: F401
    assert isinstance(exc.value, ModuleNotFoundError)
    for words in ("3.12", "diffrhythm-studio[ttnn]", "not 3.11", "python="):
        assert words in str(exc.value), words
    with pytest.raises(RuntimeError, match=re.escape("diffrhythm-studio[ttnn]")):
        make_backend("ttnn", "0")


def test_nothing_outside_the_ttnn_package_imports_ttnn() -> None:
    pattern = re.compile(r"^\s*(import ttnn|from ttnn\b)|require_ttnn\(", re.M)
    offenders = []
    for top in ("device_worker", "engine", "studio"):
        for path in (ROOT / top).rglob("*.py"):
            if "backends/ttnn" in path.as_posix():
                continue
            if pattern.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], offenders  # studio warm-cache goes through the backend, never ttnn itself


def test_a_bare_folder_named_ttnn_is_not_taken_for_the_package(tmp_path: Path) -> None:
    # A folder called ttnn on sys.path (this suite once had tests/ttnn/) imports as an empty namespace
    # package: the worker must say ttnn is missing, not fail later on `ttnn.open_device`.
    if HAS_TTNN:
        pytest.skip("a real ttnn is installed in this environment")
    (tmp_path / "ttnn").mkdir()
    code = ("from device_worker.backends.ttnn.runtime import require_ttnn, ttnn_installed\n"
            "assert not ttnn_installed()\n"
            "try:\n    require_ttnn()\nexcept ModuleNotFoundError as e:\n    print('REFUSED', e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "REFUSED" in out.stdout and "without code" in out.stdout and str(tmp_path / "ttnn") in out.stdout
