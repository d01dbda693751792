#!/usr/bin/env bash
# Every GPU kernel under compute-sanitizer, on the device machine, from the repository root:
#   bash bench/gpu_sanitize.sh [build-dir]        (STAGES="build checks faults sanitize probes")
# - checks:   every kernel's correctness check (random data, poisoned outputs, FP64 reference) through
#             GpuKernelsCuda.EveryKernelMatchesTheReference (tests/workloads/test_gpu_kernels_cuda.cpp;
#             GpuKernelsCuda.EveryCudaBackendPathIsACase fails when a CUDA path is not one of its
#             cases), and the CUDA unit tests;
# - faults:   CudaFaultsDeathTest (an illegal-address fault mid-run: each later record fails, one line);
# - sanitize: the same kernel check under memcheck (with device-leak check), racecheck, initcheck and
#             synccheck (TOOLS picks them), the tools side by side;
# - probes:   `rafter probe --device cuda --quick` under each tool (PROBE_TOOLS), one probe at a time
#             (PROBES), the tools side by side: the probes' own kernels.
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
# The kernels' own suites beside the catalogue-wide check (the FP4 GEMM, quantizer and attention
# tests check layouts, scales, seeds and shapes the catalogue check does not reach).
kernel_suites=${KERNEL_SUITES-Fp4GemmCuda.*:GpuQuant.*:AttentionCuda.*}
summary() { grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard|Uninitialized|Barrier|Leaked|PASSED|FAILED" "$1" |
  sed -E 's/0x[0-9a-f]+/ADDR/g' | sort | uniq -c | head -20; }
if has checks; then
  stamp "correctness (every kernel vs the FP64 reference) and the CUDA unit tests"
  "$test" --gtest_filter="GpuKernelsCuda.*:BackendsCuda.*:GemmSpecCuda.*:TimingPlanCuda.*:$kernel_suites" >"$out/check.log" 2>&1
  echo "exit $?"; grep -E "^check |FAILED|PASSED|SKIPPED|Failure" "$out/check.log" | head -80
fi
if has faults; then
  stamp "a sticky CUDA error mid-run"
  "$test" --gtest_filter='CudaFaultsDeathTest.*' >"$out/faults.log" 2>&1
  echo "exit $?"; grep -E "^record |OK|FAILED|PASSED" "$out/faults.log" | head -20
fi
# Runs "$@" under every tool of $tools at once (one GPU, separate processes: the tools' slowdowns
# overlap), each with its own log $log_prefix-<tool>.log and a time limit, then prints each summary.
# An argument's @TOOL@ becomes the tool's name (rafter's output lock allows one run per output file).
under_tools() {
  local log_prefix=$1 limit=$2; shift 2
  local pids=() tool
  for tool in $tools; do
    local extra=""; [ "$tool" = memcheck ] && extra="--leak-check full"
    [ "$tool" = racecheck ] && extra="${racecheck_extra:-}"
    # cuDNN's generated SDPA kernels (wgmma, TMA, mbarriers: asynchronous proxies the shared-memory
    # tools do not model) are NVIDIA's code, not ours: racecheck reports hazards inside them and
    # synccheck overflows its barrier tracking and faults them. memcheck and initcheck still check
    # them; racecheck and synccheck check every kernel of rafter's own.
    case $tool in racecheck | synccheck) extra="$extra --kernel-name-exclude kns=${THIRD_PARTY_KERNELS:-cudnn_generated}" ;; esac
    timeout "$limit" compute-sanitizer --tool "$tool" $extra --print-limit 50 "${@//@TOOL@/$tool}" \
      >"$log_prefix-$tool.log" 2>&1 &
    pids+=($!)
  done
  local i=0
  for tool in $tools; do
    wait "${pids[$i]}"; local rc=$?; echo "  $tool: exit $rc$([ $rc = 124 ] && echo ", timed out")"; summary "$log_prefix-$tool.log" | sed 's/^/    /'
    i=$((i + 1))
  done
}
if has sanitize; then
  # One run of each kernel: the test's quick policy cuts the timing repeats to the minimum.
  tools=${TOOLS-memcheck racecheck initcheck synccheck}
  stamp "compute-sanitizer ($tools) over every kernel check"
  RAFTER_CUBLASLT_ALGO=heuristic under_tools "$out/sanitize" "${SANITIZE_TIMEOUT:-400}" \
    "$test" --gtest_filter='GpuKernelsCuda.EveryKernelMatchesTheReference'
  if [ -n "$kernel_suites" ]; then
    stamp "compute-sanitizer ($tools) over the kernels' own suites ($kernel_suites)"
    RAFTER_CUBLASLT_ALGO=heuristic under_tools "$out/suites" "${SANITIZE_TIMEOUT:-400}" \
      "$test" --gtest_filter="$kernel_suites"
  fi
fi
if has probes; then
  # Each probe on its own (--filter), so that one slow probe under a tool does not hide the others.
  tools=${PROBE_TOOLS-memcheck racecheck initcheck synccheck}
  for probe in ${PROBES-cuda.launch cuda.fma cuda.dmma cuda.tensor cuda.fp4 cuda.shared cuda.latency cuda.l2_partitions cuda.bandwidth cuda.links}; do
    # Probes whose one kernel streams shared memory for milliseconds a launch: racecheck checks the
    # short first launch (fp4's correctness check, shared's untimed first launch: the same code) and
    # lets the timed ones run unchecked (hours otherwise).
    racecheck_extra=""
    [[ " ${RACECHECK_FIRST_LAUNCH_OF-cuda.shared cuda.fp4} " == *" $probe "* ]] && racecheck_extra="--launch-count 1"
    stamp "compute-sanitizer ($tools) rafter probe --device cuda --quick --filter $probe ${racecheck_extra:+(racecheck $racecheck_extra)}"
    under_tools "$out/probe-$probe" "${PROBE_TIMEOUT:-240}" "$build/apps/rafter/rafter" probe --device cuda --quick \
      --max-working-set "${PROBE_MAX_WS:-64M}" --filter "^${probe//./\\.}\$" -o "$out/machine-$probe-@TOOL@.json"
  done
fi
stamp "done"
