#!/usr/bin/env bash
# Issue 13's FP4 GEMM side-by-side in ONE device call, after bench/device_build.sh built rafter into
# [build-dir]: rafter's HBM read ceiling, rafter's NVFP4 and BF16 GEMM records of Llama-2 linears at
# 4096 and 16 tokens, PyTorch's "dequantize, then torch.matmul in BF16" (eager, torch.compile), the
# table. MODELS="7b" limits the rows, FP4_TOKENS="16" the token counts. Logs and JSON under $OUT (or /tmp/fp4-gemm).
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/fp4-gemm}
models=${MODELS:-7b 70b}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/gpu_operators_env.sh
rafter="$build/apps/rafter/rafter"
py=bench/fp4_gemm_vs_pytorch.py
timeout "${PROBE_TIMEOUT:-90}" "$rafter" probe --device cuda --quick --filter '^cuda\.bandwidth$' \
  -o "$out/machine-cuda.json" >"$out/probe.log" 2>&1 || echo "rafter probe failed (rc $?)"
timeout "${RAFTER_TIMEOUT:-240}" python3 $py rafter --rafter "$rafter" --out "$out/fp4-rafter.json" --models "$models" \
  2>&1 | tee "$out/fp4-rafter.log" | tail -4
timeout "${TORCH_TIMEOUT:-180}" python3 $py torch --out "$out/fp4-torch.json" --models "$models" \
  >"$out/fp4-torch.log" 2>&1 || { echo "torch side failed"; tail -5 "$out/fp4-torch.log"; }
python3 $py table --rafter-json "$out/fp4-rafter.json" --torch-json "$out/fp4-torch.json" \
  --machine "$out/machine-cuda.json" --models "$models" | tee "$out/fp4-table.txt"
