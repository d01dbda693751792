#!/usr/bin/env bash
# Installs what is missing (Debian packages; the PyPI GPU headers into ./.venv when CUDA is
# present), configures and builds rafter, then:
#   tools/setup.sh run    runs rafter's default job (writes ./rafter-out/)
#   tools/setup.sh test   runs the test suite (ctest)
#   tools/setup.sh build  only builds
# Environment: BUILD_DIR (default build), RAFTER_CUDA (AUTO|ON|OFF, default AUTO), JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-build}
build_dir=${BUILD_DIR:-build}
cuda=${RAFTER_CUDA:-AUTO}
jobs=${JOBS:-$(nproc)}

debs=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
      libpapi-dev libpfm4-dev libhwloc-dev hwloc libfmt-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libdnnl-dev ocl-icd-opencl-dev librsvg2-dev libxml2-utils python3-lxml chromium likwid
      libopenmpi-dev openmpi-bin)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# GPU headers and libraries Debian lacks (NVML for clocks; the cuDNN frontend's header-only C++ API
# for cuDNN attention, without its Python dependencies, which the C++ build does not use; CUPTI 13.4,
# whose range profiler resets L2 before each counted pass, where the toolkit's 13.0 cannot), into a
# project-local venv that CMake finds by a hint. The marker holds what was installed: a new list
# installs again.
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
nvml_pin="nvidia-nvml-dev==13.0.87" frontend_pin="nvidia-cudnn-frontend==1.32.0" cupti_pin="nvidia-cuda-cupti==13.4.92"
venv_wants="$nvml_pin $frontend_pin $cupti_pin"
if [ "$cuda" != OFF ] && [ -x "$nvcc_bin" ] && [ "$(cat .venv/.rafter-ok 2>/dev/null)" != "$venv_wants" ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check "$nvml_pin" \
    || echo "setup: NVML headers unavailable; clocks will come from CUDA attributes"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "$frontend_pin" \
    || echo "setup: cuDNN frontend unavailable; cuDNN attention will not be built"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "$cupti_pin" \
    || echo "setup: CUPTI 13.4 unavailable; GPU counters use the toolkit's CUPTI, without cache control"
  echo "$venv_wants" > .venv/.rafter-ok
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAFTER_CUDA="$cuda" \
  ${RAFTER_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$jobs"

case "$mode" in
  run) "$build_dir/apps/rafter/rafter" ;;
  test) ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" ;;
  build) ;;
  *) echo "setup: unknown mode '$mode' (run|test|build)" >&2; exit 2 ;;
esac
