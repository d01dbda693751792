#!/usr/bin/env bash
# Memory roofs per read:write mix on the GPU, in ONE device call (carry .device-debs): build;
# cuda.bandwidth (read, write, copy 1:1, triad 2:1 per level); rafter's memory-bound operators and
# PyTorch eager / torch.compile on the same rows (bench/gpu_operators_vs_pytorch.py); then each row's
# rate against the HBM roof of its own mix: no efficiency may pass 100 %, rafter's nor the peer's.
#   bash bench/mix_roofs_gpu.sh [build-dir]        (STAGES: build probe rows table)
set -uo pipefail
build=${1:-build-dev}
out=/tmp/mix-roofs
stages=${STAGES:-build probe rows table}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/device_prelude.sh
export PYTHONUNBUFFERED=1
trap 'tar czf "${OUT:-/tmp}/mix-roofs.tgz" -C "$out" . 2>/dev/null' EXIT
build_or_env "-DRAFTER_TESTS=OFF" || exit 1
rafter="$PWD/$build/apps/rafter/rafter"
py=bench/gpu_operators_vs_pytorch.py
if has probe; then
  timeout 240 "$rafter" probe --device cuda --filter '^cuda\.(bandwidth|launch)$' -o "$out/machine.json" >"$out/probe.txt" 2>&1
  echo "rafter probe (bandwidth, launch): exit $?"
  grep -E "^kind|bandwidth +(L2|HBM) " "$out/probe.txt"
  stamp "probe"
fi
if has rows; then
  timeout 300 python3 $py rafter --rafter "$rafter" --out "$out/rafter.json" --skip-gemm 2>&1 | tail -13
  timeout 420 python3 $py torch --out "$out/torch.json" --skip-gemm 2>&1 | tail -13
  stamp "rows"
fi
if has table; then
  python3 bench/mix_roofs_table.py "$out/machine.json" "$out/rafter.json" "$out/torch.json" | tee "$out/table.txt"
fi
stamp "done"
