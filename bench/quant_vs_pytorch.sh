#!/usr/bin/env bash
# Issue 13's quantizer side-by-side in ONE device call, after bench/device_build.sh built rafter into
# [build-dir]: rafter's HBM ceilings per read:write mix (cuda.bandwidth, quick), rafter's quantize /
# dequantize records at Llama-2 7B shapes, the same quantizers in PyTorch (eager and torch.compile,
# written from the definition in bench/quant_vs_pytorch.py), then the table. Logs and JSON under $OUT
# (or /tmp/quant).
#   bash bench/quant_vs_pytorch.sh [build-dir]        (QUANT_ROWS=patches: the hot-patch rows only;
#                                                     QUANT_AB_ENV: see the end)
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/quant}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/gpu_operators_env.sh
rafter="$build/apps/rafter/rafter"
py=bench/quant_vs_pytorch.py
timeout "${PROBE_TIMEOUT:-90}" "$rafter" probe --device cuda --quick --filter '^cuda\.bandwidth$' \
  -o "$out/machine-cuda.json" >"$out/probe.log" 2>&1 || echo "rafter probe failed (rc $?)"
timeout "${RAFTER_TIMEOUT:-120}" python3 $py rafter --rafter "$rafter" --out "$out/quant-rafter.json" \
  >"$out/quant-rafter.log" 2>&1 || { echo "rafter side failed or timed out"; tail -5 "$out/quant-rafter.log"; }
[ "${QUANT_ROWS:-}" = patches ] || timeout "${TORCH_TIMEOUT:-200}" python3 $py torch --out "$out/quant-torch.json" \
  >"$out/quant-torch.log" 2>&1 || { echo "torch side failed or timed out"; tail -5 "$out/quant-torch.log"; }
python3 $py table --rafter-json "$out/quant-rafter.json" --torch-json "$out/quant-torch.json" \
  --machine "$out/machine-cuda.json" | tee "$out/quant-table.txt"
# QUANT_AB_ENV="VAR=value ...": rafter's side once more under that environment (e.g. RAFTER_QUANT_PDL=0),
# and its table beside the same torch columns: an A/B of one change in the same call.
if [ -n "${QUANT_AB_ENV:-}" ]; then
  echo; echo "== A/B: rafter under $QUANT_AB_ENV"
  # shellcheck disable=SC2086
  env $QUANT_AB_ENV timeout "${RAFTER_TIMEOUT:-120}" python3 $py rafter --rafter "$rafter" --out "$out/quant-rafter-ab.json" \
    >"$out/quant-rafter-ab.log" 2>&1 || { echo "rafter side (A/B) failed or timed out"; tail -5 "$out/quant-rafter-ab.log"; }
  python3 $py table --rafter-json "$out/quant-rafter-ab.json" --torch-json "$out/quant-torch.json" \
    --machine "$out/machine-cuda.json" | tee "$out/quant-table-ab.txt"
fi
