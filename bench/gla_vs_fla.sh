#!/usr/bin/env bash
# Issue 14's GLA kernels in ONE device call: build rafter (test_workloads and rafter only), run the
# GLA tests and the GPU kernel check, then bench/gla_vs_fla.py: rafter's gla_chunked forward,
# backward and gla_decode (backend cuda.gla) beside flash-linear-attention's Triton kernels at GLA-1.3B
# shapes.
# Logs and JSON under $OUT (or /tmp/gla).
# On the device machine, from the repository root, carrying .device-debs (bench/device_build.sh) and
# .whl with the fla-core wheel (pip download --no-deps fla-core, /work/.library/device/README.md):
#   bash bench/gla_vs_fla.sh [build-dir]
# fla's first calls compile and autotune its Triton kernels (over a minute): give the bench stage
# several minutes, e.g. a second call with STAGES=bench on a built tree.
# STAGES (default "build test bench kcheck") picks a subset of "build test bench kernels kcheck"
# (test: the GlaCuda tests and the kernels' times; kernels: rafter's forward kernels one by one
# under ncu at KERNEL_SHAPES, fla's under torch.profiler; kcheck: the whole GpuKernelsCuda check,
# last); DEADLINE_S (default 285) is the whole call's budget: the bench gets what the build and the
# tests left (its JSON is written row by row), kcheck what the bench left.
# Everything lands in $OUT/gla-<stages>.tgz.
set -uo pipefail
build=${1:-build-dev}
out=/tmp/gla
stages=${STAGES:-build test bench kcheck}
deadline=${DEADLINE_S:-285}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/device_prelude.sh
archive_on_exit gla
rafter="$build/apps/rafter/rafter"
tests="$build/tests/test_workloads"
left() { echo $(( deadline - ($(date +%s) - bench_t0) )); }

export RAFTER_BUILD_TARGETS=${RAFTER_BUILD_TARGETS:-"test_workloads rafter"}
build_or_env || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader 2>&1
if has test; then
  timeout "${TEST_TIMEOUT:-90}" "$tests" --gtest_filter='GlaCuda.*' --gtest_also_run_disabled_tests >"$out/test.log" 2>&1
  echo "GlaCuda tests: exit $?"
  grep -E "^gla check|^gla time|Failure|FAILED|PASSED|OK \]|error:" "$out/test.log" | tail -40
  stamp "tests"
fi
if { has bench || has kernels; } && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if has kernels; then
  shapes=${KERNEL_SHAPES:-1:2048 8:2048 1:16384}
  for bs in $shapes; do
    b=${bs%%:*} s=${bs##*:}
    timeout 120 ncu --clock-control none --kernel-name regex:'gla_' --launch-count "${KERNEL_LAUNCHES:-24}" \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --page details --csv \
      "$rafter" profile --device cuda:0 --op gla_chunked --dtype bf16 --phase "${KERNEL_PHASE:-fwd}" \
      --shape "batch=$b,seq=$s,heads=4,head_dim_k=256,head_dim_v=512,chunk=64" --replace -o "$out/ncu-run-$b-$s.json" \
      >"$out/ncu-gla-$b-$s.csv" 2>"$out/ncu-gla-$b-$s.err"
    echo "ncu gla_chunked b=$b s=$s: exit $?"
    # Per launch: kernel, grid, duration (us), SM and memory throughput (%), achieved occupancy.
    python3 - "$out/ncu-gla-$b-$s.csv" <<'PY'
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, rows = rows[0], rows[1:]
ix = {k: head.index(k) for k in ("ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Unit", "Metric Value")}
want = {"Duration": "time", "Warp Cycles Per Issued Instruction": "cyc/issue", "Compute (SM) Throughput": "sm%", "Memory Throughput": "mem%",
        "Achieved Occupancy": "occ%", "Registers Per Thread": "regs"}
per = {}
for r in rows:
    if r[ix["Metric Name"]] in want:
        per.setdefault((int(r[ix["ID"]]), r[ix["Kernel Name"]].split("(")[0], r[ix["Grid Size"]]), {})[
            want[r[ix["Metric Name"]]]] = r[ix["Metric Value"]] + r[ix["Metric Unit"]].replace("usecond", "us")
for (i, k, grid), m in sorted(per.items()):
    print(f"  {i:3d} {k[:34]:<34} grid {grid:<14}", "  ".join(f"{n} {v}" for n, v in m.items()))
PY
  done
  if [ "${FLA_KERNELS_S:-200}" -gt 0 ]; then  # 0: rafter's kernels only
    timeout "${FLA_KERNELS_S:-200}" python3 bench/gla_vs_fla.py --rafter "$rafter" --out "$out/unused.json" \
      --fla-kernels "${shapes// /,}" --phases "${KERNEL_PHASE:-fwd}" >"$out/fla-kernels.log" 2>&1
    echo "fla kernels: exit $?"
    grep -E "^fla-kernel" "$out/fla-kernels.log" | tail -60
  fi
  stamp "kernels"
fi
if has bench; then
  timeout "$(( $(left) - ${KCHECK_S:-45} ))" python3 bench/gla_vs_fla.py --rafter "$rafter" --out "$out/gla.json" >"$out/bench.log" 2>&1
  rc=$?
  echo "bench: exit $rc"
  grep -E "^fla|^rafter " "$out/bench.log" | tail -30
  python3 bench/gla_vs_fla.py --rafter "$rafter" --out "$out/gla.json" --table-only
  stamp "bench"
fi
if has kcheck && [ "$(left)" -gt 20 ]; then
  timeout "$(left)" "$tests" --gtest_filter='GpuKernelsCuda.*' >"$out/kcheck.log" 2>&1
  echo "GpuKernelsCuda: exit $?"
  grep -E "^check gla|FAIL|PASSED|FAILED|OK \]" "$out/kcheck.log" | tail -20
  stamp "kcheck"
fi
