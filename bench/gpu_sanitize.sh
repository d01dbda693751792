#!/usr/bin/env bash
# Every GPU kernel under compute-sanitizer, on the device machine, from the repository root:
#   bash bench/gpu_sanitize.sh [build-dir]        (STAGES="build checks faults sanitize probes")
# - checks:   every kernel's correctness check (random data, poisoned outputs, FP64 reference) through
#             GpuKernelsCuda.EveryKernelMatchesTheReference (tests/workloads/test_gpu_kernels_cuda.cpp;
#             GpuKernelsCuda.EveryCudaBackendPathIsACase fails when a CUDA path is not one of its
#             cases), and the CUDA unit tests;
# - faults:   CudaFaultsDeathTest (an illegal-address fault mid-run: each later record fails, one line);
# - sanitize: the same kernel check under memcheck (with device-leak check), racecheck, initcheck and
#             synccheck (TOOLS picks them);
# - probes:   `rafter probe --device cuda --quick` under each tool (PROBE_TOOLS): the probes' own kernels.
# Logs go to OUT (default /tmp/gpu-sanitize); each tool's summary is printed.
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/gpu-sanitize}
stages=${STAGES:-build checks faults sanitize probes}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/device_prelude.sh
build_or_env "-DRAFTER_TESTS=ON" || exit 1
test="$build/tests/test_workloads"
summary() { grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard|Uninitialized|Barrier|Leaked|PASSED|FAILED" "$1" |
  sed -E 's/0x[0-9a-f]+/ADDR/g' | sort | uniq -c | head -20; }
if has checks; then
  stamp "correctness (every kernel vs the FP64 reference) and the CUDA unit tests"
  "$test" --gtest_filter='GpuKernelsCuda.*:BackendsCuda.*:GemmSpecCuda.*:TimingPlanCuda.*' >"$out/check.log" 2>&1
  echo "exit $?"; grep -E "^check |FAILED|PASSED|SKIPPED|Failure" "$out/check.log" | head -80
fi
if has faults; then
  stamp "a sticky CUDA error mid-run"
  "$test" --gtest_filter='CudaFaultsDeathTest.*' >"$out/faults.log" 2>&1
  echo "exit $?"; grep -E "^record |OK|FAILED|PASSED" "$out/faults.log" | head -20
fi
if has sanitize; then
  # One run of each kernel: the test's quick policy cuts the timing repeats to the minimum.
  for tool in ${TOOLS-memcheck racecheck initcheck synccheck}; do
    stamp "compute-sanitizer --tool $tool"
    extra=""; [ "$tool" = memcheck ] && extra="--leak-check full"
    RAFTER_CUBLASLT_ALGO=heuristic timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" $extra \
      --print-limit 20 "$test" --gtest_filter='GpuKernelsCuda.EveryKernelMatchesTheReference' \
      >"$out/sanitize-$tool.log" 2>&1
    echo "exit $?"; summary "$out/sanitize-$tool.log"
  done
fi
if has probes; then
  for tool in ${PROBE_TOOLS-memcheck racecheck initcheck synccheck}; do
    stamp "compute-sanitizer --tool $tool rafter probe --device cuda --quick"
    timeout "${PROBE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --print-limit 20 \
      "$build/apps/rafter/rafter" probe --device cuda --quick -o "$out/machine-$tool.json" >"$out/probe-$tool.log" 2>&1
    echo "exit $?"; summary "$out/probe-$tool.log"
  done
fi
stamp "done"
