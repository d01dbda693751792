#!/usr/bin/env bash
# Issue 14's fused attention in ONE device call: build rafter (with cuDNN attention), run the
# attention tests and compute-sanitizer memcheck on them, rafter's HBM read ceiling, then rafter's
# prefill forward/backward and decode rows beside torch SDPA (cuDNN backend forced, and its default)
# and the table (bench/attention_vs_pytorch.py). Logs and JSON under $OUT (or /tmp/attention).
# On the device machine, from the repository root, carrying .device-debs (with the cuDNN frontend
# wheel: bench/device_build.sh):
#   bash bench/attention_vs_pytorch.sh [build-dir]
# STAGES (default all) picks a subset: "build test sanitize probe bench"; SEQS, KV_LENS and
# DECODE_BATCHES pick the rows, DECODE_SPLITS adds decode rows at given split counts (bench/attention_vs_pytorch.py).
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/attention}
stages=${STAGES:-build test sanitize probe bench}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/device_prelude.sh
rafter="$build/apps/rafter/rafter"
tests="$build/tests/test_workloads"

build_or_env || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu \
  --format=csv,noheader 2>&1
grep -E "cuDNN|NVML" "$out/build.log" | head -3
if has test; then
  timeout "${TEST_TIMEOUT:-240}" "$tests" --gtest_filter='AttentionCuda.*:GpuKernelsCuda.*:BackendsCuda.*' >"$out/test.log" 2>&1
  echo "attention tests: exit $?"; grep -E "^check|FAIL|PASSED|FAILED" "$out/test.log" | grep -v "^check gemm" | tail -40
  stamp "tests"
fi
if has sanitize; then
  timeout "${SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" --gtest_filter='AttentionCuda.*' \
    >"$out/memcheck.log" 2>&1
  echo "compute-sanitizer memcheck AttentionCuda.*: exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | tail -5
  stamp "memcheck"
fi
if has probe; then
  timeout 120 "$rafter" probe --device cuda --quick --filter '^cuda\.bandwidth$' -o "$out/machine-cuda.json" \
    >"$out/probe.log" 2>&1 || { echo "rafter probe failed (rc $?)"; tail -5 "$out/probe.log"; }
  stamp "probe"
fi
if has bench; then
  timeout "${BENCH_TIMEOUT:-400}" python3 bench/attention_vs_pytorch.py --rafter "$rafter" \
    --machine "$out/machine-cuda.json" --out "$out/attention.json" >"$out/bench.log" 2>&1
  rc=$?
  echo "bench: exit $rc"
  if [ $rc -eq 0 ]; then sed -n '/^GPU /,$p' "$out/bench.log"; else  # the rows it finished
    tail -3 "$out/bench.log"
    python3 bench/attention_vs_pytorch.py --rafter "$rafter" --machine "$out/machine-cuda.json" \
      --out "$out/attention.json" --table-only
  fi
  stamp "bench"
fi
