#!/usr/bin/env bash
# The MPI launch end to end on 2 ranks of this machine (--oversubscribe: CI has 2 cores):
# every catalogue collective checked and timed by the mpi backend, a ranks mismatch as one line
# (exit 2), and a rank that hangs (RAFTER_TEST_COMM_FAULT) ending the run within the bounded
# time with one line naming it, the finished records kept. Exit 77 (ctest SKIP) without MPI.
# Usage: mpi_collectives.sh RAFTER MPIRUN PYTHON
set -euo pipefail
rafter=$1 mpirun=$2 python=$3
[ -x "$mpirun" ] || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run2() { timeout 120 "$mpirun" -np 2 --oversubscribe "$@"; }

for op in all_reduce all_gather reduce_scatter all_to_all send_recv; do
  for dtype in fp32 bf16; do
    run2 "$rafter" profile --op $op --dtype $dtype --shape elements=4096,ranks=2 --quick -o "$tmp/$op.$dtype.json" >/dev/null
    "$python" - "$tmp/$op.$dtype.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["records"][0]
assert r["status"] == "ok", r
assert r["backend"] == "mpi" and r["check"]["passed"], r
assert r["details"]["ranks"] == 2 and r["time"]["value"] > 0, r
PY
  done
done

# The record's ranks must equal the world size: one line, exit 2.
set +e
run2 "$rafter" profile --op all_reduce --dtype fp32 --shape elements=4096,ranks=4 -o "$tmp/bad.json" 2>"$tmp/bad.err" >/dev/null
rc=$?
set -e
grep -q "rafter: error: all_reduce: ranks=4 but the run has 2 rank(s)" "$tmp/bad.err" || { cat "$tmp/bad.err"; exit 1; }
[ "$rc" -ne 0 ] || { echo "ranks mismatch exited 0"; exit 1; }

# Rank 1 hangs at its second join: rank 0 names it within the timeout; the first record is kept.
start=$(date +%s)
set +e
RAFTER_TEST_COMM_FAULT=hang:1:1 run2 "$rafter" profile --model llama2-7b --phase prefill --tp 2 --batch 1 --seq 8 \
  --filter all_reduce --quick --comm-timeout 3 -o "$tmp/hang.json" 2>"$tmp/hang.err" >/dev/null
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ "$rc" -eq 2 ] || { echo "hang: exit $rc, expected 2"; cat "$tmp/hang.err"; exit 1; }
[ "$elapsed" -lt 60 ] || { echo "hang: took $elapsed s"; exit 1; }
[ "$(grep -c '^rafter: error: ' "$tmp/hang.err")" -eq 1 ] || { cat "$tmp/hang.err"; exit 1; }
grep -q "^rafter: error: rank 1 did not join all_reduce (.*) within 3 s$" "$tmp/hang.err" || { cat "$tmp/hang.err"; exit 1; }
"$python" - "$tmp/hang.json" <<'PY'
import json, sys
recs = json.load(open(sys.argv[1]))["records"]
assert recs[0]["status"] == "ok" and recs[0]["backend"] == "mpi", recs[0]
assert len(recs) >= 2 and all(r["status"] == "not_run" for r in recs[1:]), [r["status"] for r in recs]
PY
echo "mpi collectives: ok"
