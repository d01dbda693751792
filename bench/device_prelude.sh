# Sourced by the bench/*_gpu.sh scripts on the device machine: STAGES selection (has NAME), elapsed
# time stamps (stamp TEXT), and the build (the "build" stage: bench/device_build.sh into BUILD_DIR,
# log in OUT_DIR/build.log) or, when the build stage is skipped, the environment of an earlier build.
# Needs: build (build folder), out (output folder), stages (space-separated stage names).
# Also: archive_on_exit NAME (below).
has() { [[ " $stages " == *" $1 "* ]]; }
bench_t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - bench_t0 )) s] $*"; }
# $1: archive name. On exit, everything under $out goes to $OUT/<name>-<stages>.tgz (what comes
# back from the device call) and the elapsed time is stamped.
archive_on_exit() {
  archive_name=$1
  trap 'tar czf "${OUT:-/tmp}/${archive_name}-${stages// /-}.tgz" -C "$out" . 2>/dev/null; stamp "done"' EXIT
}
# $1: extra CMake arguments (e.g. -DRAFTER_TESTS=OFF). Returns non-zero when the build fails.
build_or_env() {
  if has build; then
    export RAFTER_CMAKE_ARGS="${RAFTER_CMAKE_ARGS:-} ${1:-} -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20"
    # shellcheck disable=SC1091
    source bench/device_build.sh "$build" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; return 1; }
    stamp "built"
  else
    # shellcheck disable=SC1091
    source bench/gpu_operators_env.sh
  fi
}
