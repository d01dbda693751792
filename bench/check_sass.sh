#!/usr/bin/env bash
# Checks that each CUDA probe kernel's machine code (SASS) holds the instruction the probe claims:
# the tensor probes HGMMA/QGMMA/IGMMA, the FMA probes FFMA/DFMA/DMMA, the bandwidth kernels
# 16-byte loads and stores. Needs cuobjdump (CUDA toolkit); reads the probes' object files.
# Use: bash bench/check_sass.sh [build-dir]      exit 0 when every claim holds, 1 otherwise.
set -uo pipefail
build=${1:-build-dev}
objdir="$build/probes/CMakeFiles/rafter_probes.dir/cuda"
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
if [ -z "${SASS_FILE:-}" ]; then  # SASS_FILE: a saved `cuobjdump -sass` listing, checked instead
  [ -x "$cuobjdump" ] || { echo "check_sass: cuobjdump not found"; exit 1; }
  [ -d "$objdir" ] || { echo "check_sass: no CUDA probe objects under $objdir (build with RAFTER_CUDA=ON)"; exit 1; }
fi
sass=$(mktemp)
if [ -n "${SASS_FILE:-}" ]; then cp "$SASS_FILE" "$sass"; else for o in "$objdir"/*.o; do "$cuobjdump" -sass "$o" 2>/dev/null; done >"$sass"; fi

# kernel (regex over the mangled name) | claim | instruction regex that must appear in its SASS
claims=(
  "wgmma_kernelILN.*OpE0E|bf16 wgmma|HGMMA\\.64x256x16[.A-Z0-9]*"
  "wgmma_kernelILN.*OpE1E|fp16 wgmma|HGMMA\\.64x256x16[.A-Z0-9]*"
  "wgmma_kernelILN.*OpE2E|tf32 wgmma|HGMMA\\.64x256x8[.A-Z0-9]*"
  "wgmma_kernelILN.*OpE3E|fp8 e4m3 wgmma|QGMMA\\.64x256x32[.A-Z0-9]*E4M3[.A-Z0-9]*"
  "wgmma_kernelILN.*OpE4E|fp8 e5m2 wgmma|QGMMA\\.64x256x32[.A-Z0-9]*E5M2[.A-Z0-9]*"
  "wgmma_kernelILN.*OpE5E|int8 wgmma|IGMMA\\.64x256x32[.A-Z0-9]*"
  "fp4_emulated_kernel|fp4 emulated: fp8 wgmma|QGMMA\\.64x256x32[.A-Z0-9]*E4M3[.A-Z0-9]*"
  "fma_kernelIf|fp32 ffma|FFMA"
  "fma_kernelId|fp64 dfma|DFMA"
  "dmma884|fp64 tensor m8n8k4|DMMA\\.8x8x4[.A-Z0-9]*"
  "dmma16816|fp64 tensor m16n8k16|DMMA\\.16x8x[0-9]+[.A-Z0-9]*"
  "shared_read|shared 16-byte loads|LDS\\.128"
  "sweep_l1_read|L1 sweep 16-byte loads|LDG\\.E[.A-Z0-9]*128[.A-Z0-9]*"
  "grid_read|device sweep 16-byte loads|LDG\\.E[.A-Z0-9]*128[.A-Z0-9]*"
  "onepass_copyILi8E|one-pass copy 16-byte stores|STG\\.E[.A-Z0-9]*128"
  "stream_copyILb1E|streaming copy 16-byte stores|STG\\.E[.A-Z0-9]*128"
)
status=0
for c in "${claims[@]}"; do
  IFS='|' read -r kernel claim insn <<<"$c"
  # The SASS of every function whose name matches `kernel`, up to the next function.
  body=$(awk -v k="$kernel" '/Function :/ { on = ($0 ~ k) } on' "$sass")
  if [ -z "$body" ]; then
    printf "MISSING  %-36s no kernel matching %s\n" "$claim" "$kernel"; status=1; continue
  fi
  n=$(grep -cE "$insn" <<<"$body")
  if [ "$n" -gt 0 ]; then
    printf "ok       %-36s %4d x %s\n" "$claim" "$n" "$(grep -oE "$insn" <<<"$body" | head -1)"
  else
    printf "FAIL     %-36s no %s in its SASS\n" "$claim" "$insn"; status=1
  fi
done
# A tensor kernel that fell back to the slower mma.sync path would show HMMA instead.
if awk '/Function :/ { on = ($0 ~ /wgmma_kernel/) } on' "$sass" | grep -q "HMMA"; then
  echo "FAIL     wgmma kernels hold HMMA (mma.sync path)"; status=1
fi
rm -f "$sass"
exit $status
