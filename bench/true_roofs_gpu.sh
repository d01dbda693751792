#!/usr/bin/env bash
# Issue 18's remaining GPU figures in ONE device call (carry .device-debs): build; the latency probe
# (TLB steps over cudaMalloc memory and over mapped 2 MiB pages), the L2 partitions' bandwidth and
# the tensor probe (FP8 with random and with scaled-normal operands); AdamW beside torch.compile,
# interleaved, and the kernel inductor generates for it; the GEMM rows beside PyTorch (pairs, same
# history), then the table. PROBE_FILTER overrides the probes run.
#   bash bench/true_roofs_gpu.sh [build-dir]   (STAGES: build probe adamw gemm; GEMM_ONLY: row regex)
# Everything lands in $OUT/true-roofs-<stages>.tgz.
set -uo pipefail
build=${1:-build-dev}
out=/tmp/true-roofs
stages=${STAGES:-build probe adamw gemm}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/device_prelude.sh
export PYTHONUNBUFFERED=1
archive_on_exit true-roofs
build_or_env "-DRAFTER_TESTS=OFF" || exit 1
rafter="$PWD/$build/apps/rafter/rafter"
py=bench/gpu_operators_vs_pytorch.py
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader \
  | tee "$out/nvidia-smi.csv"
if has probe; then
  s=$(date +%s)
  timeout 300 "$rafter" probe --device cuda --filter "${PROBE_FILTER:-^cuda\.(latency|l2_partitions|tensor)$}" \
    -o "$out/machine.json" >"$out/probe.txt" 2>&1
  echo "rafter probe (${PROBE_FILTER:-latency, l2_partitions, tensor}): exit $? in $(( $(date +%s) - s )) s" \
    | tee "$out/probe-wall.txt"
  echo '{}' >"$out/none.json"
  python3 bench/gpu_probes_table.py "$out/machine.json" "$out/none.json" | tee "$out/probes-table.txt"
  python3 - "$out/machine.json" <<'EOF' | tee "$out/sweeps.txt"
import json, sys
m = json.load(open(sys.argv[1]))
for s in m.get("sweeps", []):
    if s["probe"].startswith("latency_tlb"):
        print(s["probe"], " ".join(f"{p['working_set_bytes'] / 2**20:.0f}MiB:{p['figure']['value'] * 1e9:.0f}ns"
                                  for p in s["points"]))
for c in m.get("ceilings", []):
    if c["resource"] in ("fp8_e4m3", "fp8_e5m2", "bf16") and c.get("regime", "burst") == "burst":
        p = c["params"]
        print(c["resource"], f"{c['figure']['value'] / 1e12:.1f} TFLOP/s at {c.get('frequency_hz', 0) / 1e9:.3f} GHz",
              p.get("form"), p.get("operands"), json.dumps(p.get("rate_by_warpgroups_per_sm")))
EOF
  stamp "probe"
fi
if has adamw; then  # rafter and torch.compile, interleaved (three rounds each)
  for i in 0 1 2; do
    "$rafter" profile --device cuda:0 --op adamw --dtype bf16 --phase step --shape params=268435456 \
      --replace -o "$out/adamw-$i.json" >"$out/adamw-$i.log" 2>&1
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['records'][0]; t=r['time']['stats']; \
print(f'rafter adamw step, round {sys.argv[2]}: {t[\"min\"]*1e6:.1f}/{t[\"median\"]*1e6:.1f}/{t[\"max\"]*1e6:.1f} us', r.get('status'), r.get('check',{}).get('passed'))" \
      "$out/adamw-$i.json" "$i" 2>&1 | tail -1
    timeout 200 python3 $py torch --out "$out/torch-adamw-$i.json" --skip-gemm --only adamw 2>&1 | tail -1
    python3 -c "import json,sys; c=[v for k,v in json.load(open(sys.argv[1])).items() if k.startswith('adamw')][0]['compiled']; \
print(f'torch.compile adamw step, round {sys.argv[2]}: {c[\"min\"]*1e6:.1f}/{c[\"median\"]*1e6:.1f}/{c[\"max\"]*1e6:.1f} us')" \
      "$out/torch-adamw-$i.json" "$i" 2>&1 | tail -1
  done
  # The kernel torch.compile generates for the same step (inductor's output code).
  TORCH_LOGS=output_code timeout 200 python3 - >"$out/inductor-adamw.txt" 2>&1 <<'PY'
import sys
sys.path.insert(0, "bench")
import torch
import torch.nn.functional as F
import gpu_operators_vs_pytorch as g
fns = g.torch_memory_fns(torch, F)
key, inputs = g.memory_inputs(torch, "adamw step", {"params": 1 << 28})
torch.compile(fns[key])(*inputs)
torch.cuda.synchronize()
PY
  grep -nE "def triton|XBLOCK|num_warps|tl.load|tl.store|grid=|triton_meta|size_hints" "$out/inductor-adamw.txt" | head -40
  stamp "adamw"
fi
if has gemm; then
  timeout 420 python3 $py pairs --rafter "$rafter" --out "$out/rafter.json" --torch-out "$out/torch.json" \
    ${GEMM_ONLY:+--only "$GEMM_ONLY"} >"$out/pairs.log" 2>&1
  echo "pairs: exit $?"
  python3 $py table "$out/rafter.json" "$out/torch.json" 2>&1 | tee "$out/gemm-table.txt" | grep -E "^row|fp8|bf16|GEMM rows|missing" | head -60
  stamp "gemm"
fi
