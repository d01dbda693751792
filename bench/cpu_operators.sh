#!/usr/bin/env bash
# CPU operators against rafter's own measured ceilings (issue 7's "how good" table):
#   GEMM 2048³ (fp32, bf16, int8; all cores) vs the compute ceiling of that precision, and
#   memory-bound operators on tensors far beyond the last-level cache vs the DRAM bandwidth,
#   both ceilings read from a machine.json made by `rafter probe --device cpu`.
# On a shared or virtual machine the DRAM bandwidth drifts by tens of percent within minutes, so
# each memory-bound operator is also compared with the DRAM ceiling of a quick bandwidth probe run
# right before it and right after it (the higher of the two: the stricter reference), next to the
# full probe's ceiling and the best DRAM figure seen anywhere in this run; and, finest-grained,
# with the all-core read rafter profile times right before each repeat (details.dram_reference).
# Usage: bench/cpu_operators.sh [BUILD_DIR] [machine.json]   (default build-B; probes if no file)
# Writes bench/out/cpu_operators/{machine.json,<op>.json,<op>.before.json,<op>.after.json,table.md}.
# Timings on a shared machine are noisy: the table keeps median, min and max of every operator.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-B}
RAFTER=$BUILD/apps/rafter/rafter
OUT=$ROOT/bench/out/cpu_operators
mkdir -p "$OUT"
rm -f "$OUT"/*.json.tmp
MACHINE=${2:-$OUT/machine.json}
if [[ ! -f $MACHINE ]]; then
  echo "== rafter probe --device cpu (machine.json)" >&2
  "$RAFTER" probe --device cpu -o "$MACHINE" >&2
fi

dram_probe() {  # quick bandwidth sweep (~2 s) → $1
  "$RAFTER" probe --device cpu --filter cpu.bandwidth --quick -o "$1" > /dev/null 2>&1
}

run() {  # name, then rafter profile arguments
  local name=$1; shift
  echo "== $name: rafter profile $*" >&2
  "$RAFTER" profile --device cpu "$@" --json -o "$OUT/$name.json" > /dev/null
}

run_mem() {  # the same, between two quick DRAM probes
  local name=$1
  dram_probe "$OUT/$name.before.json"
  run "$@"
  dram_probe "$OUT/$name.after.json"
}

# GEMM, 2048^3, all cores, caches flushed between repeats (the default).
for p in fp32 bf16 int8; do run "gemm_$p" --op gemm --dtype $p --m 2048 --n 2048 --k 2048; done
# Memory-bound operators: every tensor >= 128 MiB (4x this machine's 32 MiB L3 at least).
run_mem residual_add --op residual_add --dtype bf16 --shape tokens=16384,hidden=4096
run_mem rmsnorm      --op rmsnorm --dtype bf16 --shape tokens=16384,hidden=4096
run_mem rmsnorm_bwd  --op rmsnorm --phase bwd --dtype bf16 --shape tokens=16384,hidden=4096
run_mem swiglu       --op swiglu --dtype bf16 --shape tokens=8192,ffn=11008
run_mem softmax      --op softmax --dtype bf16 --shape rows=8192,cols=8192
run_mem rope         --op rope --dtype bf16 --shape tokens=16384,heads=32,head_dim=128,seq=4096
run_mem embedding    --op embedding --dtype bf16 --shape tokens=16384,hidden=4096,vocab=32000
run_mem cross_entropy --op cross_entropy --dtype bf16 --shape tokens=4096,vocab=32000
run_mem cross_entropy_bwd --op cross_entropy --phase bwd --dtype bf16 --shape tokens=4096,vocab=32000
run_mem adamw        --op adamw --dtype bf16 --phase step --shape params=33554432
run_mem dequantize   --op dequantize --dtype nvfp4 --shape rows=16384,cols=4096
run_mem quantize     --op quantize --dtype nvfp4 --shape rows=16384,cols=4096
run_mem attention_decode --op attention_decode --dtype bf16 --shape batch=4,kv_len=8192,heads=32,kv_heads=32,head_dim=128

python3 - "$OUT" "$MACHINE" <<'PY'
import json, sys, glob, os
out, machine = sys.argv[1], sys.argv[2]

def ceilings(path):
    return [c for c in json.load(open(path))["ceilings"] if c["device"] == "cpu" and c.get("scope") == "device"]

def best(cs, kind, resource, operation=None):
    vals = [c for c in cs if c["kind"] == kind and c["resource"] == resource
            and (operation is None or c.get("operation") == operation)]
    return max(vals, key=lambda c: c["figure"]["value"]) if vals else None

m = ceilings(machine)
dram = best(m, "bandwidth", "DRAM")
seen = [dram["figure"]["value"]] if dram else []
rows = ["| operator | precision | shape | median | min–max | achieved | vs full probe | vs adjacent probes | vs best DRAM seen | vs paired read (median, min–max) | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
mem = []
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    base = os.path.basename(f)
    if base == "machine.json" or base.endswith(".before.json") or base.endswith(".after.json"): continue
    r = json.load(open(f))["records"][0]
    t = r["time"]; med = t["value"]; st = t.get("stats", {})
    shape = " ".join(f"{k}={v}" for k, v in sorted(r["shape"].items()))
    chk = r.get("check", {})
    check = f'{chk.get("error", 0):.1e} ≤ {chk.get("tolerance", 0):.0e}' if chk.get("passed") else "FAILED"
    timing = f'{med*1e3:.2f} ms | {st.get("min",0)*1e3:.2f}–{st.get("max",0)*1e3:.2f} ms'
    if r["op"] == "gemm":
        ceil = best(m, "compute", r["precision"])
        ach = sum(r["flops"].values()) / med
        cv = ceil["figure"]["value"] if ceil else float("nan")
        rows.append(f'| gemm | {r["precision"]} | {shape} | {timing} | {ach/1e9:.1f} GFLOP/s '
                    f'| {ach/cv:.0%} of {cv/1e9:.1f} GFLOP/s ({ceil["isa"] if ceil else "none"}) | - | - | - | {check} |')
        continue
    adj = []
    for side in ("before", "after"):
        p = f[:-5] + f".{side}.json"
        if os.path.exists(p):
            c = best(ceilings(p), "bandwidth", "DRAM")
            if c: adj.append(c["figure"]["value"])
    seen += adj
    b = next((x["bytes"] for x in r["bytes"] if x["level"] == "DRAM"), r["compulsory_bytes"])
    ref = r.get("details", {}).get("dram_reference")
    paired = (f'{ref["efficiency"]["median"]:.0%} ({ref["efficiency"]["min"]:.0%}–{ref["efficiency"]["max"]:.0%}) '
              f'of {ref["bytes_per_second"]["median"]/1e9:.1f}') if ref else "-"
    mem.append((r, shape, timing, b / med, max(adj) if adj else float("nan"), adj, check, paired))
top = max(seen) if seen else float("nan")
dv = dram["figure"]["value"] if dram else float("nan")
for r, shape, timing, ach, adj_max, adj, check, paired in mem:
    adj_txt = " / ".join(f"{a/1e9:.1f}" for a in adj)
    rows.append(f'| {r["op"]} {r["phase"]} | {r["precision"]} | {shape} | {timing} | {ach/1e9:.1f} GB/s '
                f'| {ach/dv:.0%} of {dv/1e9:.1f} | {ach/adj_max:.0%} of {adj_max/1e9:.1f} ({adj_txt}) '
                f'| {ach/top:.0%} of {top/1e9:.1f} | {paired} | {check} |')
rows.append("")
rows.append(f"DRAM ceilings (all cores, best operation): full probe {dv/1e9:.1f} GB/s; quick probes around the "
            f"operators {min(seen)/1e9:.1f}–{top/1e9:.1f} GB/s. Bytes are the operator's analytic DRAM traffic. "
            f"Paired read: rafter's own all-core read of 256 MiB right before each repeat (run.json details.dram_reference).")
open(os.path.join(out, "table.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
