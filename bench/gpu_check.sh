#!/usr/bin/env bash
# The whole GPU check in one command, on the GPU machine as it really is: its own python3 (3.12) and torch,
# no package registry, only the working tree and .device sent along (bench/device_prepare.sh makes
# .device here, online). Target: under 8 minutes of device time, warm-ups included.
#
#   bash bench/gpu_check.sh                        # on the GPU machine (device tool: carry [".device"])
#   GPU_CHECK_REHEARSE=1 bash bench/gpu_check.sh   # here: the same steps on the CPU at tiny sizes, with no
#                                                  # network, in .venv-rehearse (torch + image packages only)
#
# Steps: the wheels installed with --no-index into a folder of their own; what ran where (GPU, driver,
# torch); the `cuda` tests; the compile and worker-timing tests; bench/cpu_step.py (the CPU's bfloat16
# step); bench/gpu_song.py (release size on the GPU, tiny on the CPU). GPU_CHECK_ONLY=a,b reruns some. Everything goes to $OUT (bench/out/gpu-check when unset) as it happens:
# gpu_check.log, gpu_check.json (each step's exit code and seconds), the tests' junit XML, cpu_step.json
# and gpu_song.json (every row as it is measured), so a run cut off by its time limit still reports.
# Exit code: 0 only when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REHEARSE="${GPU_CHECK_REHEARSE:-0}"
if [ "$REHEARSE" = 1 ] && [ "${GPU_CHECK_OFFLINE:-0}" != 1 ]; then
  # Proven offline: no network namespace but loopback, as on the GPU machine (no registry reachable).
  exec unshare -n env GPU_CHECK_OFFLINE=1 bash "$0" "$@"
fi

OUT="${OUT:-$ROOT/bench/out/gpu-check}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
T0=$SECONDS
BUDGET="${GPU_CHECK_BUDGET_S:-450}"  # seconds for the whole check; the song bench gets what is left
if [ "$REHEARSE" = 1 ]; then
  [ -x .venv-rehearse/bin/python ] || { echo "no .venv-rehearse: run bench/device_prepare.sh first"; exit 2; }
  PY=.venv-rehearse/bin/python
  ip link set lo up 2>/dev/null || true  # the worker's sockets and the tests' servers use loopback
else
  PY=python3
fi
pyver=$($PY -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheels=.device/wheels/$pyver
[ -d "$wheels" ] || { echo "no $wheels: run bench/device_prepare.sh here first (and carry .device)"; exit 2; }

SITE="${GPU_CHECK_SITE:-/tmp/drs-gpu-check-site}"
rm -rf "$SITE"
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$wheels"/*.whl \
  || { echo "installing the carried wheels failed"; exit 2; }
export PYTHONPATH="$SITE:$ROOT" STUDIO_SHARED_DIR="$ROOT/.device/shared" GRADIO_ANALYTICS_ENABLED=False
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

STEPS="$(mktemp)"  # name, exit code, seconds (gpu_check.json carries them; $OUT keeps to 8 files)
: >"$STEPS"
failed=0
summary() {  # gpu_check.json: what ran where and each step's outcome, rewritten after every step
  $PY - "$OUT" "$STEPS" "$REHEARSE" "$((SECONDS - T0))" <<'EOF'
import json, sys
out, steps, rehearse, elapsed = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
rows = [line.rstrip("\n").split("\t") for line in open(steps) if line.strip()]
env = {}
try:
    env = json.load(open(f"{out}/env.json"))
except OSError:
    pass
report = {"rehearsal": rehearse, "elapsed_s": elapsed, "env": env,
          "steps": [{"step": n, "rc": int(rc), "seconds": int(s)} for n, rc, s in rows]}
json.dump(report, open(f"{out}/gpu_check.json", "w"), indent=1)
EOF
}
ONLY="${GPU_CHECK_ONLY:-}"  # e.g. "cuda-tests,gpu-song,cpu-step": a rerun of some steps (env always runs)
step() {  # step NAME TIMEOUT_S COMMAND...: run it, record its exit code and seconds, carry on either way
  local name=$1 limit=$2; shift 2
  if [ -n "$ONLY" ] && [ "$name" != env ] && [[ ",$ONLY," != *",${name%%-all-ran},"* ]]; then
    echo "== $name: skipped (GPU_CHECK_ONLY=$ONLY)"; return 0
  fi
  local t=$SECONDS
  echo; echo "== $name (limit ${limit} s, $((SECONDS - T0)) s into the check)"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  [ $rc -eq 124 ] && echo "$name: stopped at its ${limit} s limit"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t))" >>"$STEPS"
  [ $rc -eq 0 ] || failed=1
  summary
  return 0
}

step env 60 $PY - "$OUT/env.json" "$REHEARSE" <<'EOF'
import json, platform, shutil, subprocess, sys
import torch, msgspec, zmq
import device_worker.worker, engine.remote  # what the check runs imports here, not half-way through
path, rehearse = sys.argv[1], sys.argv[2] == "1"
cuda = torch.cuda.is_available()
env = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda_runtime": torch.version.cuda,
       "cuda_available": cuda, "msgspec": msgspec.__version__, "pyzmq": zmq.__version__,
       "machine": platform.machine(), "cpu_count": __import__("os").cpu_count()}
if cuda:
    p = torch.cuda.get_device_properties(0)
    env.update(gpu=p.name, gpu_memory_mib=p.total_memory // 2**20, capability=f"{p.major}.{p.minor}",
               multiprocessors=p.multi_processor_count)
if shutil.which("nvidia-smi"):
    env["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                        "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
json.dump(env, open(path, "w"), indent=1)
print(json.dumps(env, indent=1))
if not cuda and not rehearse:
    sys.exit("torch sees no CUDA GPU: this is not the GPU machine (GPU_CHECK_REHEARSE=1 rehearses on the CPU)")
EOF

# On the GPU every cuda test must run: a skip there (no reference set carried, no GPU seen) fails the step.
# Here they must be collected and skip saying why; an error in them fails the step all the same.
step cuda-tests 300 $PY -m pytest -q -rs -m cuda tests/model/test_cuda.py -p no:cacheprovider \
  --junitxml="$OUT/cuda_tests.xml"
if [ "$REHEARSE" != 1 ]; then
  step cuda-tests-all-ran 10 $PY -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
s = r if r.tag == "testsuite" else r.find("testsuite")
print("cuda tests:", {k: s.get(k) for k in ("tests", "failures", "errors", "skipped")})
sys.exit(int(s.get("skipped", 0)) > 0 or int(s.get("tests", 0)) == 0)' "$OUT/cuda_tests.xml"
fi
step compile-timing-tests 240 $PY -m pytest -q -rs tests/model/test_compiled.py tests/worker/test_worker_timing.py \
  -p no:cacheprovider --junitxml="$OUT/compile_timing_tests.xml"

# The CPU's half of the accelerators work: one guided step at release width, float32 against bfloat16
# (eager, the old 3-D Linear path, compiled), on this machine's CPU (the GPU machine's has AMX or
# AVX512-BF16, which this workplace's own machines may lack).
if [ "$REHEARSE" = 1 ]; then
  step cpu-step 300 $PY bench/cpu_step.py --depth 1 --frames 64 --repeats 1 --json "$OUT/cpu_step.json"
else
  step cpu-step 240 $PY bench/cpu_step.py --depth 4 --frames 2048 --repeats 3 --compile --native-only --json "$OUT/cpu_step.json"
fi

left=$((BUDGET - (SECONDS - T0)))
if [ "$REHEARSE" = 1 ]; then
  # The device's rows and its worker row, so every path it takes runs here first, but upstream's float16
  # row: float16 on a CPU is emulated (197 s for that row alone on a loaded 2-core machine), and its code is
  # load_dit(half_mode="upstream"), which tests/model/test_sampler_reference.py runs against upstream's vectors.
  # The budget skips rows rather than cutting the step.
  step gpu-song $((left > 120 ? left : 120)) $PY bench/gpu_song.py --device cpu --preset tiny --steps 4 --songs 95 \
    --rows fp32,bf16,bf16-eager --worker-songs 95 --json "$OUT/gpu_song.json" \
    --budget-s $((left > 150 ? left - 60 : 90))
else
  models="${MODELS_TMP:-}"
  if [ -z "$models" ]; then  # RAM-backed when it has room: 4.5 GB written and read back 8 times
    shm_kb=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1 || echo 0)
    if [ "${shm_kb:-0}" -gt 12000000 ]; then models=/dev/shm/drs-release-models; else models=/tmp/drs-release-models; fi
  fi
  # Rows start only while the budget lasts (the last one may run ~90 s past it); the limit is the backstop.
  step gpu-song $((left > 150 ? left : 150)) $PY bench/gpu_song.py --device cuda:0 --preset release --dir "$models" \
    --rows fp32,bf16,upstream,bf16-eager --worker-songs 95 --json "$OUT/gpu_song.json" --budget-s $((left > 240 ? left - 90 : 150))
fi

echo; echo "== done in $((SECONDS - T0)) s; steps (name, exit code, seconds):"; cat "$STEPS"
summary
rm -f "$STEPS"
exit $failed
