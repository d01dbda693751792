#!/usr/bin/env bash
# The long fuzz runs of docs/fuzzing.md: every target (or TARGETS="a b") until RUNS executions in
# total (default 10,000,000), then one table line per target: executions, exec/s, coverage (cov:
# edges, ft: features), corpus size, crashes. WORKERS=N runs N fuzzer processes per target on one
# shared corpus folder (each -runs=RUNS/N, its own seed; libFuzzer reloads the folder, so they share
# finds). SKIP_BUILD=1 uses an already-built $BUILD_DIR (default build-fuzz), e.g. binaries carried
# to a larger machine; else it builds like .ci/fuzz. Corpora, logs and saved crashing inputs go to
# $OUT (default bench/out/fuzz-long/<time>); the checkout's corpora are only read.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10000000}
workers=${WORKERS:-1}
build=${BUILD_DIR:-build-fuzz}
out=${OUT:-bench/out/fuzz-long/$(date +%Y%m%d-%H%M%S)}
targets=${TARGETS:-$(sed -n 's/^set(rafter_fuzz_targets \(.*\))$/\1/p' fuzz/CMakeLists.txt)}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAFTER_CUDA=OFF -DRAFTER_FUZZ=ON \
    -DRAFTER_TESTS=OFF -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  cmake --build "$build" --target rafter_fuzz -j "${JOBS:-$(nproc)}"
fi
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 HWLOC_COMPONENTS=-pci

# Last coverage line of a log: "cov ft".
coverage() { grep -E '(DONE|pulse|NEW|REDUCE|INITED) +cov:' "$1" | tail -1 | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*/\1 \2/'; }

mkdir -p "$out"
lines=()
for t in $targets; do
  dir=$out/$t
  mkdir -p "$dir/corpus" "$dir/artifacts"
  find fuzz/corpus/"$t" fuzz/regressions/"$t" -type f ! -name '.*' -exec cp -t "$dir/corpus" {} +
  per_worker=$(( (runs + workers - 1) / workers ))
  start=$(date +%s%N)
  pids=()
  for w in $(seq 1 "$workers"); do
    "$build/fuzz/fuzz_$t" -runs="$per_worker" -seed="$w" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/worker$w.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done  # a crash ends its worker; the artifacts count it
  wall_ns=$(( $(date +%s%N) - start ))
  execs=0 cov=0 ft=0
  for w in $(seq 1 "$workers"); do
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/worker$w.log" | tail -1)
    execs=$((execs + ${n:-0}))
    read -r c f < <(coverage "$dir/worker$w.log" || echo "0 0")
    [ "${c:-0}" -gt "$cov" ] && cov=$c
    [ "${f:-0}" -gt "$ft" ] && ft=$f
  done
  crashes=$(find "$dir/artifacts" -type f | wc -l)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  rate=$(( execs * 1000000000 / (wall_ns > 0 ? wall_ns : 1) ))
  lines+=("$(printf '%-16s %12d %9d %6d %7d %7d %7d' "$t" "$execs" "$rate" "$cov" "$ft" "$corpus" "$crashes")")
  echo "fuzz_long: ${lines[-1]}" >&2
done
printf '%-16s %12s %9s %6s %7s %7s %7s\n' target execs exec/s cov ft corpus crashes
printf '%s\n' "${lines[@]}"
echo "logs, corpora and crashing inputs: $out"
