#!/usr/bin/env bash
# Every GPU kernel's correctness check (random data, poisoned outputs, FP64 reference) and
# compute-sanitizer (memcheck; racecheck on the same run) over one run of each kernel, through
# the test GpuKernelsCuda.EveryKernelMatchesTheReference (tests/workloads/test_gpu_kernels_cuda.cpp).
# On the device machine, from the repository root, after bench/device_build.sh (or with
# build=DIR already configured):   bash bench/gpu_sanitize.sh [build-dir]
# TOOLS (default "memcheck racecheck") picks the sanitizer tools; TOOLS= runs the checks alone.
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/gpu-sanitize}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/gpu_operators_env.sh
cmake -S . -B "$build" -DRAFTER_TESTS=ON >"$out/configure.log" 2>&1 && \
  cmake --build "$build" --target test_workloads -j 16 >"$out/build-tests.log" 2>&1 || {
  tail -30 "$out/build-tests.log"; exit 1; }
test="$build/tests/test_workloads"
filter='--gtest_filter=GpuKernelsCuda.*:BackendsCuda.*:GemmSpecCuda.*:TimingPlanCuda.*'
echo "== correctness (every kernel vs the FP64 reference)"
"$test" "$filter" 2>&1 | tee "$out/check.log" | grep -E "^check |FAILED|PASSED|SKIPPED|Failure" | head -80
# One run of each kernel: the timing repeats are cut to the minimum by the test's quick policy.
for tool in ${TOOLS-memcheck racecheck}; do
  echo "== compute-sanitizer --tool $tool"
  RAFTER_CUBLASLT_ALGO=heuristic timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --print-limit 20 "$test" --gtest_filter='GpuKernelsCuda.*' \
    >"$out/sanitize-$tool.log" 2>&1
  echo "exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard|PASSED|FAILED" "$out/sanitize-$tool.log" | sort | uniq -c | head -20
done
