#!/usr/bin/env bash
# rafter's CPU tests on emulated CPUs that truly lack what rafter dispatches around: QEMU's user-mode
# emulator (TCG, which implements AVX2 but no AVX-512) runs the test binaries and one BF16 GEMM
# through the CLI as
#   Haswell  AVX2 + FMA, no AVX-512 (an AVX2-only server such as a Zen 3 EPYC reads the same to rafter)
#   Nehalem  SSE4.2, no AVX          (rafter's baseline kernel builds, its sse probe kernels)
#   Conroe   SSSE3, no SSE4.1        (below oneDNN's narrowest ISA: its reference code)
# so that an instruction of a wider ISA anywhere on those paths faults (SIGILL), whatever the host
# has. No RAFTER_CPU_ISA / ONEDNN_MAX_CPU_ISA: the emulated CPUID is the only thing holding them.
# About 30 s on the 2-core Zen 4 VM.
# usage: qemu_cpus.sh BUILD_DIR [QEMU]
set -euo pipefail
build=${1:?usage: qemu_cpus.sh BUILD_DIR [QEMU]}
qemu=${2:-qemu-x86_64}
unset RAFTER_CPU_ISA ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# QEMU warns once per CPUID feature of the model that TCG lacks (pcid, x2apic, ...): not ours.
quiet() { "$qemu" "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2); }

status=0
for cpu in Haswell Nehalem Conroe; do
  echo "== qemu -cpu $cpu"
  quiet -cpu "$cpu" "$build/tests/test_workloads" --gtest_brief=1 \
    --gtest_filter='CpuKernels.*:CpuIsaPaths.*:ProfileRunJson.*:-CpuKernels.StreamingOperatorsCarryAPairedDramReference' ||
    status=1
  quiet -cpu "$cpu" "$build/tests/test_probes" --gtest_brief=1 \
    --gtest_filter='CpuKernels.*:CpuIsaHold.*:CpuOptions.*:DescribeCpu.*' || status=1
  if quiet -cpu "$cpu" "$build/apps/rafter/rafter" profile --device cpu --op gemm --dtype bf16 --m 256 --n 256 --k 256 \
    --quick -o "$out/gemm-$cpu.json" > "$out/gemm-$cpu.txt"; then
    grep -E '^gemm ' "$out/gemm-$cpu.txt" || true
    grep -q '"status": "ok"' "$out/gemm-$cpu.json" || { echo "gemm on $cpu: record not ok"; status=1; }
  else
    echo "rafter profile on $cpu failed"
    status=1
  fi
done
exit $status
