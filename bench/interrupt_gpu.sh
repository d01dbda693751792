#!/usr/bin/env bash
# On the device machine after a build (bench/device_build.sh or bench/gpu_sanitize.sh): SIGINT in the
# middle of a GPU model step (`rafter profile --device cuda`), then SIGTERM in the middle of the GPU
# probes. Prints the exit status, the time from signal to exit, and what the written file holds.
#   bash bench/interrupt_gpu.sh [build-dir]
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/interrupt-gpu}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/gpu_operators_env.sh
rafter="$build/apps/rafter/rafter"
# $1 name, $2 progress text to wait for, $3 signal, $4 output file, rest: rafter's arguments
interrupt() {
  local name=$1 wait_for=$2 sig=$3 file=$4; shift 4
  RAFTER_PROGRESS=lines "$rafter" "$@" --replace -o "$file" >"$out/$name.out" 2>"$out/$name.err" &
  local pid=$!
  for _ in $(seq 600); do grep -q "$wait_for" "$out/$name.err" && break; sleep 0.1; done
  local t0; t0=$(date +%s%N)
  kill "-$sig" "$pid"; wait "$pid"; local code=$?
  echo "$name: SIGNAL $sig after '$wait_for': exit $code $(( ($(date +%s%N) - t0) / 1000000 )) ms after the signal"
  tail -1 "$out/$name.err"
  python3 - "$file" <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
if "records" in d:
    print("  interrupted:", d.get("interrupted"), dict(collections.Counter(r["status"] for r in d["records"])))
else:
    print("  interrupted:", d.get("interrupted"), "ceilings:", len(d["ceilings"]), "not run:", d["conditions"].get("probes_not_run"))
PY
}
interrupt profile "profile 6/" INT "$out/run.json" profile --device cuda --model llama2-7b --phase prefill --seq 2048
interrupt probe "probe cuda:0 4/" TERM "$out/machine.json" probe --device cuda --quick
