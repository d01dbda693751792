#!/usr/bin/env bash
# Issue 13 on the GPU (carry .device-debs; see device_build.sh): build; the FP4 kernel checks (and
# compute-sanitizer's memcheck over the decode GEMM's); the quantizer table (bench/quant_vs_pytorch.sh);
# the decode rows of the FP4 GEMM table beside BF16 and PyTorch (bench/fp4_gemm_vs_pytorch.sh,
# FP4_TOKENS=16); Nsight Compute on the decode GEMM; the Llama-2 7B training step at
# 4096 tokens in NVFP4, BF16 and FP8 and the GLA-1.3B one in NVFP4, with `rafter compare` of the
# three 7B steps; the Llama-2 70B decode step (batch 16, KV 4096) in NVFP4 and BF16 with their
# `rafter compare` (stage decode_step). Logs, run.json files and the charts land in $OUT/nvfp4.tgz.
#   bash bench/nvfp4_gpu.sh [build-dir]
# STAGES (default all) picks a subset, e.g. two calls of under 10 minutes each on a warm machine:
#   STAGES="build tests quant" ...   then   STAGES="decode ncu steps" ...
# Stage ncu_quant (not in the default): Nsight Compute on the NVFP4 encoders' amax and encoding passes.
# NCU_QUANT_ARGS adds ncu options, e.g. "--clock-control none --replay-mode application" for each
# pass's duration at the GPU's own clocks, with L2 as the run before it left it (every pass reruns
# rafter: raise NCU_QUANT_TIMEOUT, default 120 s).
# Stage ncu: NCU_SHAPES (the decode GEMM's shapes) and NCU_ARGS (more ncu options, e.g. sections).
# TEST_FILTER replaces the tests stage's gtest filter, MEMCHECK_FILTER its memcheck's (default the
# decode GEMM's tests); RACECHECK_FILTER adds a racecheck run over those tests; QUANT_FILTER
# (bench/quant_vs_pytorch.py) the quantizer rows. Stage hot (not in the default): the hot patch's
# share of its decode GEMM on the eight 7B/70B linears.
set -uo pipefail
build=${1:-build-dev}
out=/tmp/nvfp4
stages=${STAGES:-build tests quant decode ncu steps decode_step}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/device_prelude.sh
export PYTHONUNBUFFERED=1
archive_on_exit nvfp4

RAFTER_BUILD_TARGETS=${RAFTER_BUILD_TARGETS:-rafter test_workloads} build_or_env "" || exit 1
rafter="$PWD/$build/apps/rafter/rafter"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
  --format=csv,noheader | tee "$out/nvidia-smi.csv"

if has tests; then
  timeout "${TESTS_TIMEOUT:-450}" "$build/tests/test_workloads" \
    --gtest_filter="${TEST_FILTER:-Fp4GemmCuda.*:GpuQuant.*:GpuKernelsCuda.Fp4GemmTimesItsHotPatch}" >"$out/test_fp4.log" 2>&1
  echo "test_workloads (FP4, quantizers, hot patch): exit $?"
  grep -E -A3 "^\[  (PASSED|FAILED) |Failure|^hot patch" "$out/test_fp4.log" | head -40
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 "$build/tests/test_workloads" \
    --gtest_filter="${MEMCHECK_FILTER:-Fp4GemmCuda.DecodeKernel*}" >"$out/memcheck_fp4.log" 2>&1
  echo "compute-sanitizer memcheck (${MEMCHECK_FILTER:-Fp4GemmCuda.DecodeKernel*}): exit $?"
  grep -E "ERROR SUMMARY" "$out/memcheck_fp4.log"
  if [ -n "${RACECHECK_FILTER:-}" ]; then
    timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 "$build/tests/test_workloads" \
      --gtest_filter="$RACECHECK_FILTER" >"$out/racecheck_fp4.log" 2>&1
    echo "compute-sanitizer racecheck ($RACECHECK_FILTER): exit $?"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$out/racecheck_fp4.log"
  fi
  stamp "tests"
fi

# The hot-channel patch's cost (stage hot, not in the default): the eight Llama-2 7B/70B linears at
# HOT_TOKENS (16) tokens with the recipe's HOT (32) channels, HOT_ROUNDS (2) rounds; each record
# times its GEMM with the patch and the same GEMM without it (details.hot_patch), and prints which
# patch path won the record's contest (the epilogue, a separate BF16 GEMM or the dependent kernel)
# with the mean of each one's contest medians (HOT_ALGO=heuristic: no contest, the path the heuristic
# picks, checked and timed). HOT=1% takes
# that share of each linear's input channels instead (the issue's k: 41 at K 4096, 287 at 28672).
if has hot; then
  # model_layer:n:k:hot of the FP4 GEMM table's linears (bench/gpu_operators_vs_pytorch.py's
  # LINEARS), hot the channels patched (HOT, or HOT % of k)
  hot_rows=$(HOT=${HOT:-32} python3 -c 'import os, sys; sys.path.insert(0, "bench")
from fp4_gemm_vs_pytorch import LAYERS, LINEARS
h = os.environ["HOT"]
def hot(k): return max(1, round(k * float(h[:-1]) / 100)) if h.endswith("%") else int(h)
print(" ".join(f"{m}_{l}:{n}:{k}:{hot(k)}" for m, l, n, k in LINEARS if l in LAYERS))')
  for round in $(seq "${HOT_ROUNDS:-2}"); do
    for row in $hot_rows; do
      IFS=: read -r name n k hot <<<"$row"
      f="$out/hot-$name-$round.json"
      timeout 60 "$rafter" profile --device cuda --op gemm --dtype nvfp4 --phase fwd --algo "${HOT_ALGO:-best}" \
        --shape "m=${HOT_TOKENS:-16},n=$n,k=$k,batch=1,hot=$hot" --replace -o "$f" >"$f.txt" 2>&1 ||
        { echo "hot $name: exit $?"; tail -2 "$f.txt"; continue; }
      python3 - "$f" "$name" "$round" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["records"][0]
h = r["details"]["hot_patch"]
c = h.get("candidates", {})
med = lambda p: sum(c[p]["contest_seconds"]) / len(c[p]["contest_seconds"]) * 1e6 if "contest_seconds" in c.get(p, {}) else float("nan")
print(f"hot patch {sys.argv[2]:<16} round {sys.argv[3]} ({h['channels']} channels, {r['status']}, check "
      f"{'passed' if r.get('check', {}).get('passed') else 'NOT passed'}): with {r['time']['value'] * 1e6:8.2f} us,"
      f" without {h['gemm_without_patch_seconds'] * 1e6:8.2f} us, share {h['patch_share'] * 100:5.1f} %"
      f" [{h.get('path', 'prefill')}; contest fused {med('fused'):.2f} / separate {med('separate'):.2f}"
      f" / dependent {med('dependent'):.2f} us]")
PY
    done
  done
  stamp "hot patch"
fi

if has quant; then
  OUT="$out/quant" PROBE_TIMEOUT=40 RAFTER_TIMEOUT=80 TORCH_TIMEOUT=150 bash bench/quant_vs_pytorch.sh "$build"
  stamp "quantizers"
fi

if has decode; then
  OUT="$out/decode" FP4_TOKENS=${FP4_TOKENS:-16} PROBE_TIMEOUT=40 RAFTER_TIMEOUT=150 TORCH_TIMEOUT=120 \
    bash bench/fp4_gemm_vs_pytorch.sh "$build"
  stamp "decode rows"
fi

# Nsight Compute on the NVFP4 encoders, each shape's amax pass and encoding pass of one call
# (NCU_QUANT_SHAPES, default: activations 4096² and 4096×11008 (rows kernel), the 16×16 tiles
# kernel on 11008×4096, SR on 4096×11008): where the time goes (L2 hit rate, DRAM bytes, stalls).
if has ncu_quant; then
  for shape in ${NCU_QUANT_SHAPES:-rows=4096,cols=4096 rows=4096,cols=11008 rows=11008,cols=4096,block2d=1 rows=4096,cols=11008,sr=1}; do
    # shellcheck disable=SC2086
    timeout "${NCU_QUANT_TIMEOUT:-120}" ncu --cache-control none ${NCU_QUANT_ARGS:-} --launch-skip 4 --launch-count 2 \
      -k regex:'amax|quantize_' --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum "$rafter" profile \
      --device cuda --op quantize --dtype nvfp4 --phase fwd --shape "$shape" --quick >"$out/ncu-quant-$shape.txt" 2>&1
    echo "ncu quantize $shape: exit $?"
    grep -E "_kernel|Duration|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit|Mem Busy|Warp Cycles Per Issued|Issued Ipc|Registers Per|Achieved Occupancy|dram__bytes|lts__t_sector_hit|smsp__inst_executed|Stall" \
      "$out/ncu-quant-$shape.txt" | head -40
  done
  stamp "ncu_quant"
fi

# Nsight Compute on the decode GEMM (NCU_SHAPES, default two shapes; NCU_ARGS adds ncu options): where
# its time goes (speed of light, warp stalls).
if has ncu; then
  for shape in ${NCU_SHAPES:-m=16,n=12288,k=4096 m=16,n=57344,k=8192}; do
    # shellcheck disable=SC2086
    timeout 120 ncu ${NCU_ARGS:-} --launch-skip 2 --launch-count 1 -k regex:decode --section SpeedOfLight \
      --section WarpStateStats --section Occupancy --section LaunchStats "$rafter" profile --device cuda --op gemm \
      --dtype nvfp4 --phase fwd --shape "$shape,batch=1" >"$out/ncu-$shape.txt" 2>&1
    echo "ncu $shape: exit $?"
    grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occ|Warp Cycles Per Issued|Issued Ipc|Block Limit|Cluster Size|Grid Size" \
      "$out/ncu-$shape.txt" | head -14
  done
  stamp "ncu"
fi

# $1 model, $2 precision, $3 timeout (s): one --quick training step at 4096 tokens into $out.
step() {
  local s; s=$(date +%s)
  timeout "$3" "$rafter" profile --device cuda --model "$1" --phase train --seq 4096 --precision "$2" --quick \
    --algo heuristic --replace -o "$out/train-$1-$2.json" >"$out/train-$1-$2.txt" 2>"$out/train-$1-$2.err"
  echo "rafter profile --device cuda --model $1 --phase train --seq 4096 --precision $2 --quick --algo heuristic:" \
    "exit $?, $(( $(date +%s) - s )) s"
  head -3 "$out/train-$1-$2.err"
  grep -E "^total:|^step|record\(s\)|no backend|no_backend|failed|quantiz" "$out/train-$1-$2.txt" | head -8
}
if has steps; then
  step llama2-7b nvfp4 240
  step gla-1.3b nvfp4 150
  step llama2-7b bf16 150
  step llama2-7b fp8 150
  timeout 120 "$rafter" probe --device cuda --quick -o "$out/machine.json" >"$out/probe.txt" 2>&1
  (cd "$out" && "$rafter" compare train-llama2-7b-bf16.json train-llama2-7b-fp8.json train-llama2-7b-nvfp4.json \
    -m machine.json -o compare-7b.svg >compare-7b.txt 2>&1; echo "rafter compare (7B bf16, fp8, nvfp4): exit $?"
    grep -iE "^total|step|quantiz" compare-7b.txt | head -12)
  stamp "steps"
fi

# The 70B decode step: every linear's FP4 GEMM and its patch, against BF16.
if has decode_step; then
  for p in nvfp4 bf16; do
    timeout 200 "$rafter" profile --device cuda --model llama2-70b --phase decode --batch 16 --kv-len 4096 \
      --precision $p --quick --algo heuristic --replace -o "$out/decode-llama2-70b-$p.json" >"$out/decode-llama2-70b-$p.txt" \
      2>"$out/decode-llama2-70b-$p.err"
    echo "rafter profile --device cuda --model llama2-70b --phase decode --batch 16 --kv-len 4096 --precision $p: exit $?"
    grep -E "^total:|^step|record\(s\)|no_backend|failed" "$out/decode-llama2-70b-$p.txt" | head -4
  done
  [ -f "$out/machine.json" ] || timeout 120 "$rafter" probe --device cuda --quick -o "$out/machine.json" >"$out/probe.txt" 2>&1
  (cd "$out" && "$rafter" compare decode-llama2-70b-bf16.json decode-llama2-70b-nvfp4.json -m machine.json \
    -o compare-70b-decode.svg >compare-70b-decode.txt 2>&1; echo "rafter compare (70B decode bf16, nvfp4): exit $?"
    grep -iE "^total|step|quantiz|gemm" compare-70b-decode.txt | head -12)
  stamp "decode step"
fi
