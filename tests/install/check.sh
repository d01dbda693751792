#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds a consumer with find_package(rafter).
#   tests/install/check.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/rafter/collector/machine_profile.hpp"
test -f "$tmp/prefix/lib/cmake/rafter/rafterConfig.cmake"
test -d "$tmp/prefix/share/rafter/models"
cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer" | grep -q "median 2"
echo "install + find_package(rafter): ok"
