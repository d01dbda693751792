#!/usr/bin/env bash
# Issue 8's side-by-side in ONE device call: build rafter with CUDA, run rafter's GPU operators
# (GEMMs of Llama-2 7B/70B linear layers in BF16 and FP8, INT8 8192³, memory-bound kernels at
# 16384 tokens) and PyTorch (eager, torch.compile, torch._scaled_mm, torch._int_mm) on the same
# GPU, rafter's HBM copy probe for the 85% target, Nsight Compute on a few operators, a whole
# Llama-2 7B prefill step, then the tables. Logs and JSON under $OUT (or /tmp/gpu-operators).
# On the device machine, from the repository root, carrying .device-debs:
#   bash bench/gpu_operators_vs_pytorch.sh [build-dir]
# STAGES (default all) picks a subset: "build probe rafter torch ncu model table".
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/gpu-operators}
stages=${STAGES:-build probe rafter torch ncu model table}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
has() { [[ " $stages " == *" $1 "* ]]; }
rafter="$build/apps/rafter/rafter"
py=bench/gpu_operators_vs_pytorch.py
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

if has build; then
  # CMake releases before 3.26 lack the flag for CUDA C++20: give it explicitly (harmless later).
  export RAFTER_CMAKE_ARGS="${RAFTER_CMAKE_ARGS:-} -DRAFTER_TESTS=OFF -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20"
  # shellcheck disable=SC1091
  source bench/device_build.sh "$build" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  stamp "built"
fi
# shellcheck disable=SC1091
source bench/gpu_operators_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu \
  --format=csv,noheader 2>&1 | tee "$out/nvidia-smi.csv"

if has probe; then  # rafter's own HBM copy ceiling, the base of the 85% target
  timeout "${PROBE_TIMEOUT:-120}" "$rafter" probe --device cuda --quick --filter '^cuda\.bandwidth$' -o "$out/machine-cuda.json" \
    >"$out/probe.log" 2>&1 || { echo "rafter probe failed (rc $?), falling back to cudaMemcpy"; tail -5 "$out/probe.log"; }
  stamp "probe"
fi
if has rafter; then
  # GEMMs: rafter and PyTorch back to back per row (same clock and power state), then our kernels.
  timeout "${RAFTER_TIMEOUT:-300}" python3 $py pairs --rafter "$rafter" --out "$out/rafter.json" \
    --torch-out "$out/torch.json" 2>&1 | tee "$out/pairs.log" | tail -3
  timeout "${RAFTER_TIMEOUT:-300}" python3 $py rafter --rafter "$rafter" --out "$out/rafter.json" --skip-gemm \
    --append 2>&1 | tee "$out/rafter.log" | tail -3
  stamp "rafter rows"
fi
if has torch; then  # PyTorch eager and torch.compile for the memory-bound rows, cudaMemcpy bandwidth
  timeout "${TORCH_TIMEOUT:-300}" python3 $py torch --out "$out/torch.json" --skip-gemm --append 2>&1 \
    | tee "$out/torch.log" | tail -3
  stamp "torch rows"
fi
if has ncu; then
  timeout "${NCU_TIMEOUT:-240}" python3 $py ncu --rafter "$rafter" --out "$out/ncu.json" 2>&1 | tee "$out/ncu.log"
  stamp "ncu"
fi
if has model; then
  s=$(date +%s%N)
  timeout 180 "$rafter" profile --device cuda --model llama2-7b --phase prefill --seq 4096 --replace -o "$out/llama2-7b-prefill.json" \
    >"$out/model.log" 2>&1
  rc=$?
  echo "rafter profile --device cuda --model llama2-7b --phase prefill --seq 4096: exit $rc," \
       "$(python3 -c "print(round(($(date +%s%N) - $s) / 1e9, 1))") s wall (target < 60 s)"
  tail -25 "$out/model.log"
fi
if has table; then
  python3 $py table "$out/rafter.json" "$out/torch.json" --machine "$out/machine-cuda.json" \
    --ncu-json "$out/ncu.json" | tee "$out/table.txt"
fi
stamp "done"
