#!/usr/bin/env bash
# Run here, online, before a GPU machine is at hand: gathers what bench/gpu_check.sh needs there, where no
# package registry can be reached and only the working tree plus named paths travel (64 MiB in all).
#
#   bash bench/device_prepare.sh        # from the repository root, ../shared beside it
#
# Writes (all git-ignored):
#   .device/wheels/cp312/   CPython 3.12 manylinux x86-64 wheels of every package the check imports that the
#                           GPU machine's image lacks (bench/device_image.txt lists what it has), one version
#                           each, no dependencies pulled (each one's own needs are on the image or listed here)
#   .device/wheels/cpXY/    the same packages for this machine's python3 (the rehearsal runs on it)
#   .device/shared/         the reference checkpoints and cases the `cuda` tests and the tiny bench read
#   .venv-rehearse/         a virtualenv with torch and packages of the image's list only, nothing of the
#                           project's: `GPU_CHECK_REHEARSE=1 bash bench/gpu_check.sh` runs in it, offline
# and prints what will travel: the working tree plus .device, against the 64 MiB limit.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the check imports beyond the image (found by the rehearsal: it fails on anything missing).
NEEDS=(msgspec pyzmq)
# What the rehearsal's virtualenv gets besides torch: the image's packages the check imports.
IMAGE_SUBSET=(numpy safetensors pytest psutil)
SHARED="${STUDIO_SHARED_DIR:-../shared}/reference/diffrhythm"

image=$(grep -v '^#' bench/device_image.txt)
for name in "${NEEDS[@]}"; do
  ! grep -qx "$name" <<<"$image" || { echo "$name is on the image already: drop it from NEEDS"; exit 1; }
done
for name in "${IMAGE_SUBSET[@]}"; do
  grep -qx "$name" <<<"$image" || { echo "$name is not on the image: the rehearsal may not have it"; exit 1; }
done

# One version of each: the one this project's environment runs, when there is one, so both sides agree.
pins=()
for name in "${NEEDS[@]}"; do
  v=$(.venv/bin/python -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
  pins+=("$name${v:+==$v}")
done

here=$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
rm -rf .device/wheels
for py in 312 "$here"; do
  [ -d ".device/wheels/cp$py" ] && continue
  platforms=()
  for n in 2_28 2_27 2_24 2_17 2014 1; do
    case $n in 2014|1) platforms+=(--platform "manylinux${n}_x86_64");; *) platforms+=(--platform "manylinux_${n}_x86_64");; esac
  done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "3.${py#3}" --implementation cp \
    "${platforms[@]}" -d ".device/wheels/cp$py" "${pins[@]}"
done

# The reference set the cuda tests and `gpu_song.py --preset tiny` read (not the lyrics or style sets).
if [ ! -d "$SHARED" ]; then
  echo "no reference set at $SHARED (set STUDIO_SHARED_DIR): the cuda tests would skip there"; exit 1
fi
dest=.device/shared/reference/diffrhythm
rm -rf .device/shared && mkdir -p "$dest/cases"
cp -r "$SHARED"/{README.md,vocal.npy,dit-tiny-base,dit-tiny-full,vae-tiny} "$dest/"
cp "$SHARED"/cases/{sampler_,vae_}* "$dest/cases/"

# The rehearsal's environment: torch (this machine's CPU wheel) and image packages, nothing else.
if [ ! -x .venv-rehearse/bin/python ]; then
  python3 -m venv .venv-rehearse
  .venv-rehearse/bin/pip install -q torch==2.13.0 "${IMAGE_SUBSET[@]}"
fi

echo "wheels:"; ls .device/wheels/*
tree_kb=$(git ls-files -co --exclude-standard -z | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)
device_kb=$(du -sk .device | cut -f1)
total=$(( (tree_kb + device_kb) / 1024 ))
echo "travels: working tree ${tree_kb} KiB + .device ${device_kb} KiB = ${total} MiB of 64 MiB"
[ "$total" -lt 64 ] || { echo "over the 64 MiB the device tool carries"; exit 1; }
echo "rehearse: GPU_CHECK_REHEARSE=1 bash bench/gpu_check.sh"
echo "on the GPU: the device tool's run with carry [\".device\"] and: bash bench/gpu_check.sh"
