# Sourced by bench/gpu_operators_vs_pytorch.sh and bench/gpu_sanitize.sh on the device machine: the
# run-time environment of a rafter built by bench/device_build.sh (its carried Debian packages live
# under /opt/deps), for shells other than the one that sourced device_build.sh.
export CMAKE_PREFIX_PATH=/opt/deps/usr:/opt/deps/usr/lib/x86_64-linux-gnu/cmake
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export LIBRARY_PATH=$LD_LIBRARY_PATH CPATH=/opt/deps/usr/include
