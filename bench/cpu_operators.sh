#!/usr/bin/env bash
# CPU operators against rafter's own measured ceilings (issue 7's "how good" table):
#   GEMM 2048³ (fp32, bf16, int8; all cores) vs the compute ceiling of that precision, and
#   memory-bound operators on tensors far beyond the last-level cache vs the DRAM bandwidth,
#   both ceilings read from a machine.json made by `rafter probe --device cpu`.
# Usage: bench/cpu_operators.sh [BUILD_DIR] [machine.json]   (default build-B; probes if no file)
# Writes bench/out/cpu_operators/{machine.json,<op>.json,table.md}. Timings on a shared machine
# are noisy: the table keeps median, min and max of every operator.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-B}
RAFTER=$BUILD/apps/rafter/rafter
OUT=$ROOT/bench/out/cpu_operators
mkdir -p "$OUT"
MACHINE=${2:-$OUT/machine.json}
if [[ ! -f $MACHINE ]]; then
  echo "== rafter probe --device cpu (machine.json)" >&2
  "$RAFTER" probe --device cpu -o "$MACHINE" >&2
fi

run() {  # name, then rafter profile arguments
  local name=$1; shift
  echo "== $name: rafter profile $*" >&2
  "$RAFTER" profile --device cpu "$@" --json -o "$OUT/$name.json" > /dev/null
}

# GEMM, 2048^3, all cores, caches flushed between repeats (the default).
for p in fp32 bf16 int8; do run "gemm_$p" --op gemm --dtype $p --m 2048 --n 2048 --k 2048; done
# Memory-bound operators: every tensor >= 128 MiB (4x this machine's 32 MiB L3 at least).
run residual_add --op residual_add --dtype bf16 --shape tokens=16384,hidden=4096
run rmsnorm      --op rmsnorm --dtype bf16 --shape tokens=16384,hidden=4096
run rmsnorm_bwd  --op rmsnorm --phase bwd --dtype bf16 --shape tokens=16384,hidden=4096
run swiglu       --op swiglu --dtype bf16 --shape tokens=8192,ffn=11008
run softmax      --op softmax --dtype bf16 --shape rows=8192,cols=8192
run rope         --op rope --dtype bf16 --shape tokens=16384,heads=32,head_dim=128,seq=4096
run embedding    --op embedding --dtype bf16 --shape tokens=16384,hidden=4096,vocab=32000
run cross_entropy --op cross_entropy --dtype bf16 --shape tokens=4096,vocab=32000
run adamw        --op adamw --dtype bf16 --phase step --shape params=33554432
run dequantize   --op dequantize --dtype nvfp4 --shape rows=16384,cols=4096
run quantize     --op quantize --dtype nvfp4 --shape rows=16384,cols=4096
run attention_decode --op attention_decode --dtype bf16 --shape batch=4,kv_len=8192,heads=32,kv_heads=32,head_dim=128

python3 - "$OUT" "$MACHINE" <<'PY'
import json, sys, glob, os
out, machine = sys.argv[1], sys.argv[2]
m = json.load(open(machine))
def best(kind, resource):
    vals = [c for c in m["ceilings"] if c["device"] == "cpu" and c["kind"] == kind
            and c["resource"] == resource and c.get("scope") == "device"]
    return max(vals, key=lambda c: c["figure"]["value"]) if vals else None
def best_op(kind, resource, operation):
    vals = [c for c in m["ceilings"] if c["device"] == "cpu" and c["kind"] == kind and c["resource"] == resource
            and c.get("scope") == "device" and c.get("operation") == operation]
    return max(vals, key=lambda c: c["figure"]["value"]) if vals else None
rows = ["| operator | precision | shape | median | min–max | achieved | rafter ceiling | ratio | vs DRAM load | check |",
        "|---|---|---|---|---|---|---|---|---|---|"]
dram = best("bandwidth", "DRAM")
dram_load = best_op("bandwidth", "DRAM", "load")
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    if f.endswith("machine.json"): continue
    r = json.load(open(f))["records"][0]
    t = r["time"]; med = t["value"]; st = t.get("stats", {})
    shape = " ".join(f"{k}={v}" for k, v in sorted(r["shape"].items()))
    chk = r.get("check", {})
    check = f'{chk.get("error", 0):.1e} ≤ {chk.get("tolerance", 0):.0e}' if chk.get("passed") else "FAILED"
    if r["op"] == "gemm":
        flops = sum(r["flops"].values())
        ceil = best("compute", r["precision"])
        ach = flops / med
        ceil_v = ceil["figure"]["value"] if ceil else float("nan")
        rows.append(f'| gemm | {r["precision"]} | {shape} | {med*1e3:.2f} ms | {st.get("min",0)*1e3:.2f}–{st.get("max",0)*1e3:.2f} ms '
                    f'| {ach/1e9:.1f} GFLOP/s | {ceil_v/1e9:.1f} GFLOP/s ({ceil["isa"] if ceil else "none"}) | {ach/ceil_v:.0%} | - | {check} |')
    else:
        b = next((x["bytes"] for x in r["bytes"] if x["level"] == "DRAM"), r["compulsory_bytes"])
        ach = b / med
        dv = dram["figure"]["value"] if dram else float("nan")
        rows.append(f'| {r["op"]} {r["phase"]} | {r["precision"]} | {shape} | {med*1e3:.2f} ms | {st.get("min",0)*1e3:.2f}–{st.get("max",0)*1e3:.2f} ms '
                    f'| {ach/1e9:.1f} GB/s | {dv/1e9:.1f} GB/s (DRAM {dram["operation"] if dram else "?"}) | {ach/dv:.0%} '
                    f'| {ach/dram_load["figure"]["value"]:.0%} | {check} |')
open(os.path.join(out, "table.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
