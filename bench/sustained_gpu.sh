#!/usr/bin/env bash
# Burst and sustained tensor-core ceilings in ONE device call (carry .device-debs): build; `rafter
# probe --sustained 15` on cuda.tensor (each precision a ~10 ms-launch burst, then held 15 s with
# the SM clock, board power and temperature read after every launch), plus cuda.bandwidth and
# cuda.launch; then a Llama-2 7B BF16 training step, and its report, judged on the sustained roofs.
#   bash bench/sustained_gpu.sh [build-dir]      (HOLD=seconds, STAGES: build probe step)
set -uo pipefail
build=${1:-build-dev}
out=/tmp/sustained
hold=${HOLD:-15}
stages=${STAGES:-build probe step}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/device_prelude.sh
trap 'tar czf "${OUT:-/tmp}/sustained.tgz" -C "$out" . 2>/dev/null' EXIT
build_or_env "-DRAFTER_TESTS=OFF" || exit 1
rafter="$PWD/$build/apps/rafter/rafter"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
if has probe; then
  timeout 400 "$rafter" probe --device cuda --filter '^cuda\.(tensor|bandwidth|launch)$' --quick --sustained "$hold" \
    -o "$out/machine.json" >"$out/probe.txt" 2>&1
  echo "rafter probe --sustained $hold: exit $?"
  grep -E "^kind|^compute" "$out/probe.txt"
  python3 - "$out/machine.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for c in m["ceilings"]:
    if c["kind"] == "compute" and c.get("regime") == "sustained":
        p = c["params"]
        print(f"{c['resource']:<9} burst {p['burst_value'] / 1e12:7.1f} T  held {p['hold_seconds']:.0f} s "
              f"{c['figure']['value'] / 1e12:7.1f} T ({p['sustained_over_burst'] * 100:.1f}%)  SM "
              f"{p['sm_clock_hz']['median'] / 1e9:.3f} GHz  power {p['power_watts']['min']:.0f}-"
              f"{p['power_watts']['max']:.0f} W  temp {p['temperature_c']['min']:.0f}-{p['temperature_c']['max']:.0f} C")
PY
  stamp "probe"
fi
if has step; then
  timeout 300 "$rafter" profile --device cuda --model llama2-7b --phase train --seq 4096 --quick \
    --filter 'gemm|proj|lm_head' --replace -o "$out/train-bf16.json" >"$out/train.txt" 2>&1
  echo "train step (GEMMs): exit $?"
  "$rafter" report "$out/train-bf16.json" --machine "$out/machine.json" >"$out/report.txt" 2>&1
  head -1 "$out/report.txt"; grep -E "^step:|time by binding" "$out/report.txt"
  stamp "step"
fi
