#!/usr/bin/env bash
# The MPI launch end to end on 2 ranks of this machine (--oversubscribe: CI has 2 cores):
# every catalogue collective checked and timed by the mpi backend, a ranks mismatch as one line
# (exit 2), a rank that hangs (RAFTER_TEST_COMM_FAULT) ending the run within the bounded time
# with one line naming it, a rank that dies, the finished records kept either way, and the
# comm.mpi probe's ceilings; groups of ranks inside a world of 4 (a TP×DP grid). Exit 77 (ctest SKIP)
# without MPI.
# Usage: mpi_collectives.sh RAFTER MPIRUN PYTHON
set -euo pipefail
rafter=$1 mpirun=$2 python=$3
[ -x "$mpirun" ] || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Under the sanitizer build: what Open MPI keeps allocated at exit is not rafter's to free (the other
# tests check rafter's own leaks).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run2() { timeout 120 "$mpirun" -np 2 --oversubscribe "$@"; }

for op in all_reduce all_gather reduce_scatter all_to_all send_recv; do
  for dtype in fp32 bf16; do
    run2 "$rafter" profile --op $op --dtype $dtype --shape elements=4096,ranks=2 --quick -o "$tmp/$op.$dtype.json" >/dev/null
    "$python" - "$tmp/$op.$dtype.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["records"][0]
assert r["status"] == "ok", r
assert r["backend"] == "cpu.mpi" and r["check"]["passed"], r
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

# Groups inside a world of 4 (a TP×DP grid): an all-reduce over consecutive pairs and over pairs 2
# apart, each checked (rank 0's group against the reference) and timed together; a world that does
# not form the groups is one line (exit 2); then a small model's training step with --tp 2 --dp 2
# --zero 1, its TP all-reduces over consecutive pairs and its ZeRO collectives over pairs 2 apart.
run4() { timeout 180 "$mpirun" -np 4 --oversubscribe "$@"; }
for stride in 1 2; do
  run4 "$rafter" profile --op all_reduce --dtype bf16 --shape "elements=4096,ranks=2,stride=$stride" --quick \
    -o "$tmp/group$stride.json" >/dev/null
  "$python" - "$tmp/group$stride.json" "$stride" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["records"][0]
assert r["status"] == "ok" and r["check"]["passed"] and r["details"]["ranks"] == 2, r
assert r["details"]["groups"] == f"2 groups of 2 ranks {sys.argv[2]} apart in a world of 4, timed together", r
PY
done
set +e
run2 "$rafter" profile --op all_reduce --dtype fp32 --shape elements=4096,ranks=2,stride=2 -o "$tmp/bad2.json" 2>"$tmp/bad2.err" >/dev/null
rc=$?
set -e
grep -q "rafter: error: all_reduce: ranks=2 stride=2: the run's 2 rank(s) do not form groups of 2 ranks 2 apart" \
  "$tmp/bad2.err" || { cat "$tmp/bad2.err"; exit 1; }
[ "$rc" -ne 0 ] || { echo "stride mismatch exited 0"; exit 1; }
echo '{"name": "mini", "hidden": 256, "heads": 4, "kv_heads": 4, "head_dim": 64, "ffn": 512, "layers": 2, "vocab": 1000}' \
  >"$tmp/mini.json"
run4 "$rafter" profile --model-file "$tmp/mini.json" --phase train --tp 2 --dp 2 --zero 1 --seq 8 \
  --filter 'all_reduce|reduce_scatter|all_gather' --quick -o "$tmp/grid.json" >/dev/null
"$python" - "$tmp/grid.json" <<'PY'
import json, sys
recs = json.load(open(sys.argv[1]))["records"]
assert recs and all(r["status"] == "ok" and r["check"]["passed"] for r in recs), [(r["label"], r["status"]) for r in recs]
zero = [r for r in recs if r["label"].startswith("zero.")]
assert len(zero) == 2 and all(r["shape"]["stride"] == 2 and "2 apart" in r["details"]["groups"] for r in zero), zero
tp = [r for r in recs if r["label"].endswith("tp_all_reduce")]
assert tp and all("stride" not in r["shape"] and "1 apart" in r["details"]["groups"] for r in tp), tp
PY

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
assert recs[0]["status"] == "ok" and recs[0]["backend"] == "cpu.mpi", recs[0]
assert len(recs) >= 2 and all(r["status"] == "not_run" for r in recs[1:]), [r["status"] for r in recs]
PY
# Rank 1 dies at its second join: mpirun stops rank 0 (SIGTERM), which keeps what finished.
set +e
RAFTER_TEST_COMM_FAULT=exit:1:1 run2 "$rafter" profile --model llama2-7b --phase prefill --tp 2 --batch 1 --seq 8 \
  --filter all_reduce --quick --comm-timeout 3 -o "$tmp/exit.json" 2>"$tmp/exit.err" >/dev/null
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "exit: mpirun exited 0"; exit 1; }
"$python" - "$tmp/exit.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
recs = run["records"]
assert recs[0]["status"] == "ok" and all(r["status"] == "not_run" for r in recs[1:]), [r["status"] for r in recs]
assert run["interrupted"] == "SIGTERM", run.get("interrupted")
PY

# comm.mpi: every collective in FP32 and BF16 as a link and a latency ceiling for 2 ranks; only
# rank 0 writes; alone the probe measures nothing and says why.
run2 "$rafter" probe --device cpu --filter comm.mpi --quick -o "$tmp/machine.json" >/dev/null
"$rafter" probe --device cpu --filter comm.mpi --quick -o "$tmp/alone.json" >/dev/null
"$rafter" report "$tmp/all_reduce.fp32.json" --machine "$tmp/machine.json" >/dev/null  # it reads back
"$python" - "$tmp/machine.json" "$tmp/alone.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
links = [c for c in m["ceilings"] if c["kind"] == "link" and c["resource"] == "mpi:2"]
lats = [c for c in m["ceilings"] if c["kind"] == "latency" and c["resource"] == "mpi:2"]
ops = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}
assert {(c["operation"], c["isa"]) for c in links} == {(o, t) for o in ops for t in ("fp32", "bf16")}, links
assert len(lats) == len(links) == 12
for c in links:
    p = c["params"]
    assert c["scope"] == "device" and p["ranks"] == 2 and len(p["sizes"]) == 3, c
    last = p["sizes"][-1]
    assert abs(last["busbw_Bps"] - last["algbw_Bps"] * p["bus_factor"]) <= 1e-6 * last["busbw_Bps"], c
    assert abs(last["algbw_Bps"] - last["bytes"] / last["time_s"]) <= 1e-6 * last["algbw_Bps"], c
    assert c["figure"]["value"] > 0
assert {c["params"]["bytes"] for c in lats} == {8}, lats
alone = json.load(open(sys.argv[2]))
assert not alone["ceilings"] and "one rank" in alone["conditions"]["comm.mpi"], alone["conditions"]
PY
# Under mpirun too, a probe into a profile of this host keeps what it did not measure (the README's
# GPU probe, then comm.mpi into the same file), and an output rank 0 refuses (probe's or profile's)
# stops every rank at once, with one rafter line, the file untouched (not after the ranks' 60 s
# wait for rank 0).
"$rafter" probe --device cpu --quick --filter '^cpu[.]launch$' -o "$tmp/merged.json" >/dev/null 2>&1
run2 "$rafter" probe --device cpu --filter comm.mpi --quick -o "$tmp/merged.json" >/dev/null 2>&1
"$python" - "$tmp/merged.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert {c["probe"] for c in m["ceilings"]} == {"cpu.launch", "comm.mpi"}, {c["probe"] for c in m["ceilings"]}
assert m["conditions"]["merged"]["kept_probes"] == ["cpu cpu.launch"], m["conditions"]["merged"]
PY
echo "not a profile" > "$tmp/refused.json"
start=$SECONDS
if run2 "$rafter" probe --device cpu --filter comm.mpi --quick -o "$tmp/refused.json" >/dev/null 2>"$tmp/refused.err"; then
  echo "a probe into a file that is not a machine profile succeeded"; exit 1
fi
[ $((SECONDS - start)) -lt 30 ] || { echo "the refusal took $((SECONDS - start)) s"; exit 1; }
[ "$(grep -c '^rafter: ' "$tmp/refused.err")" = 1 ] || { cat "$tmp/refused.err"; exit 1; }
grep -q "not overwritten (--replace overwrites it)" "$tmp/refused.err"
[ "$(cat "$tmp/refused.json")" = "not a profile" ]
start=$SECONDS  # the same for profile's output path (a folder that does not exist)
if run2 "$rafter" profile --op all_reduce --dtype fp32 --shape elements=4096,ranks=2 --quick \
    -o "$tmp/no-such-folder/run.json" >/dev/null 2>"$tmp/refused.err"; then
  echo "a profile into a folder that does not exist succeeded"; exit 1
fi
[ $((SECONDS - start)) -lt 30 ] || { echo "profile's refusal took $((SECONDS - start)) s"; exit 1; }
[ "$(grep -c '^rafter: ' "$tmp/refused.err")" = 1 ] || { cat "$tmp/refused.err"; exit 1; }
# Four ranks: a sweep per group size, mpi:2 over consecutive pairs (both pairs at once) and mpi:4.
run4 "$rafter" probe --device cpu --filter comm.mpi --quick -o "$tmp/machine4.json" >/dev/null
"$python" - "$tmp/machine4.json" <<'PY'
import json, sys
links = [c for c in json.load(open(sys.argv[1]))["ceilings"] if c["kind"] == "link"]
by = {r: [c for c in links if c["resource"] == r] for r in ("mpi:2", "mpi:4")}
assert len(by["mpi:2"]) == len(by["mpi:4"]) == 12 and len(links) == 24, [c["resource"] for c in links]
assert all(c["params"]["groups"] == "2 groups of 2 ranks 1 apart in a world of 4, timed together" for c in by["mpi:2"])
assert all("groups" not in c["params"] and c["params"]["ranks"] == 4 for c in by["mpi:4"])
PY
echo "mpi collectives: ok"
