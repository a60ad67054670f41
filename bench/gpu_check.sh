#!/usr/bin/env bash
# The whole GPU check in one command, on a fresh NVIDIA machine (target: under 8 minutes, install included):
# a venv with torch's CUDA build and the project, the `cuda` tests, then bench/gpu_song.py at release size.
#
#   bash bench/gpu_check.sh            # from the repository root; ../shared beside it for the reference set
#
# Prints what ran where: the GPU's name, the test summary, then the per-song table of bench/gpu_song.py.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

venv="${GPU_VENV:-.venv-gpu}"
python3 -m venv "$venv"
# torch from PyPI is the CUDA build on Linux x86-64 (the CPU-only wheel is what .ci/run installs elsewhere).
"$venv/bin/pip" install -q "torch==2.13.0" -e ".[test]"
"$venv/bin/python" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"

export GRADIO_ANALYTICS_ENABLED=False
"$venv/bin/python" -m pytest -q -rs -m cuda tests/test_cuda.py
"$venv/bin/python" -m pytest -q tests/test_compiled.py tests/test_worker_timing.py
"$venv/bin/python" bench/gpu_song.py --device cuda:0 --preset release --dir "${MODELS_TMP:-/tmp/release-models}"
