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
# STAGES (default all) picks a subset of "build test bench kcheck" (test: the GlaCuda tests and the
# kernels' times; kcheck: the whole GpuKernelsCuda check, last); DEADLINE_S (default 285) is the
# whole call's budget: the bench gets what the build and the tests left (its JSON is written row by
# row), kcheck what the bench left.
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/gla}
stages=${STAGES:-build test bench kcheck}
deadline=${DEADLINE_S:-285}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/device_prelude.sh
rafter="$build/apps/rafter/rafter"
tests="$build/tests/test_workloads"
left() { echo $(( deadline - ($(date +%s) - bench_t0) )); }

export RAFTER_BUILD_TARGETS="test_workloads rafter"
build_or_env || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader 2>&1
if has test; then
  timeout "${TEST_TIMEOUT:-90}" "$tests" --gtest_filter='GlaCuda.*' --gtest_also_run_disabled_tests >"$out/test.log" 2>&1
  echo "GlaCuda tests: exit $?"
  grep -E "^gla check|^gla time|Failure|FAILED|PASSED|OK \]|error:" "$out/test.log" | tail -40
  stamp "tests"
fi
if has bench; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
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
