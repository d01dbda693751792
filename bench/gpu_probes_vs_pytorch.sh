#!/usr/bin/env bash
# Issue 3's side-by-side, in ONE device call: build rafter with CUDA, run `rafter probe --device
# cuda` (timed), run PyTorch's reference figures on the same GPU, print both columns with their
# ratio and the targets, and check the probes' SASS. Logs and JSON go to $OUT (or /tmp/gpu-probes).
# Use on the device machine, from the repository root, carrying .device-debs:
#   bash bench/gpu_probes_vs_pytorch.sh [build-dir]
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/gpu-probes}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# CMake releases before 3.26 lack the flag for CUDA C++20: give it explicitly (harmless later).
export RAFTER_CMAKE_ARGS="${RAFTER_CMAKE_ARGS:-} -DRAFTER_TESTS=OFF -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20"
t0=$(date +%s)
# shellcheck disable=SC1091
source bench/device_build.sh "$build" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu,ecc.mode.current \
  --format=csv >"$out/nvidia-smi.csv" 2>&1; cat "$out/nvidia-smi.csv"

start_ns=$(date +%s%N)
"$build/apps/rafter/rafter" probe --device cuda -o "$out/machine-cuda.json" >"$out/probe.log" 2>&1
rc=$?
wall=$(python3 -c "print(round(($(date +%s%N) - $start_ns) / 1e9, 1))")
echo "rafter probe --device cuda: exit $rc, ${wall} s"
[ $rc -eq 0 ] || tail -30 "$out/probe.log"

python3 bench/reference.py --json "$out/reference.json" >"$out/reference.log" 2>&1 || tail -20 "$out/reference.log"

echo; echo "== SASS check"; bash bench/check_sass.sh "$build" | tee "$out/sass.log"
echo; echo "== rafter vs PyTorch (same GPU, same call)"
python3 bench/gpu_probes_table.py "$out/machine-cuda.json" "$out/reference.json" "$wall" | tee "$out/table.txt"
