#!/usr/bin/env bash
# On the device machine (Ubuntu, CUDA 13, no PAPI/libpfm4/oneDNN/CLI11): unpack the carried Debian
# packages into /opt/deps, take the NVML header and the cuDNN frontend headers from the carried
# wheels, and build rafter there (cuDNN itself is the device's system one).
# Use:  source bench/device_build.sh [build-dir]     (carry .device-debs; see docs/operators-cuda.md)
# A machine still held from the call before keeps that call's build folder: a script that builds a
# variant by swapping a source file must touch the file it restores, or ninja keeps the variant's
# object (an H200 call measured a variant that way, bench/fp4_gemm_results.md, 2026-11-28).
# RAFTER_BUILD_TARGETS (space-separated) builds only those targets.
# Prepare the carried folder here first:  bash ../shared/device/fetch-debs.sh .device-debs &&
#   (cd .device-debs && apt-get download libdnnl2 libdnnl-dev libgtest-dev) &&
#   pip download --no-deps -d .device-debs nvidia-nvml-dev==13.0.87 nvidia-cudnn-frontend==1.32.0 \
#     nvidia-cuda-cupti==13.4.92
rafter_build_dir=${1:-build-dev}
mkdir -p /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
for w in .device-debs/nvidia_nvml_dev-*.whl; do
  [ -f "$w" ] && python3 -m zipfile -e "$w" /opt/deps/nvml
done
for w in .device-debs/nvidia_cudnn_frontend-*.whl; do  # only its include/ is used
  [ -f "$w" ] && python3 -m zipfile -e "$w" /opt/deps/cudnn_frontend
done
for w in .device-debs/nvidia_cuda_cupti-*.whl; do  # CUPTI 13.4: the range profiler's cache control
  [ -f "$w" ] && python3 -m zipfile -e "$w" /opt/deps/cupti
done
export CMAKE_PREFIX_PATH=/opt/deps/usr:/opt/deps/usr/lib/x86_64-linux-gnu/cmake
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LIBRARY_PATH=$LD_LIBRARY_PATH CPATH=/opt/deps/usr/include
nvml_inc=$(dirname "$(find /opt/deps/nvml -name nvml.h 2>/dev/null | head -1)" 2>/dev/null)
cudnn_fe_inc=$(dirname "$(find /opt/deps/cudnn_frontend -maxdepth 2 -name cudnn_frontend.h 2>/dev/null | head -1)" 2>/dev/null)
cmake -S . -B "$rafter_build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAFTER_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a ${nvml_inc:+-DNVML_INCLUDE_DIR=$nvml_inc} \
  ${cudnn_fe_inc:+-DCUDNN_FRONTEND_INCLUDE_DIR=$cudnn_fe_inc} \
  $([ -f /opt/deps/cupti/nvidia/cu13/lib/libcupti.so.13 ] && echo -DRAFTER_CUPTI_ROOT=/opt/deps/cupti/nvidia/cu13) \
  ${RAFTER_CMAKE_ARGS:-} \
  && cmake --build "$rafter_build_dir" -j "$(nproc)" ${RAFTER_BUILD_TARGETS:+--target $RAFTER_BUILD_TARGETS}
