#!/usr/bin/env bash
# CPU operators against rafter's own measured ceilings (issue 7's "how good" table):
#   GEMM 2048³ (fp32, bf16, int8; all cores) vs the compute ceiling of that precision, and
#   memory-bound operators on tensors far beyond the last-level cache vs the DRAM bandwidth,
#   both ceilings read from a machine.json made by `rafter probe --device cpu`.
# On a shared or virtual machine the DRAM bandwidth drifts by tens of percent within minutes, so
# each memory-bound operator is also compared with the DRAM ceiling of a quick bandwidth probe run
# right before it and right after it (the higher of the two: the stricter reference), next to the
# full probe's ceiling and the best DRAM figure seen anywhere in this run; and, finest-grained,
# with the DRAM reference rafter profile times right before each repeat (details.dram_reference:
# an all-core read and an all-core non-temporal copy). On this host reads alone top out well below
# reads plus streamed writes (2 cores: each core's outstanding misses bound its reads), so the
# "matched" reference interpolates between the read and the copy rate by the operator's write
# fraction f (writes / all DRAM bytes, from the formulas in docs/operators.md): read at f = 0,
# copy at f >= 1/2. Each memory-bound operator runs RAFTER_BENCH_ROUNDS times (default 3), each
# time between its two quick probes; the table keeps the round with the median matched efficiency.
# Usage: bench/cpu_operators.sh [BUILD_DIR] [machine.json]   (default build-B; probes if no file)
# Writes bench/out/cpu_operators/{machine.json,<op>[.rN].json,<op>.rN.{before,after}.json,table.md}.
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
  "$RAFTER" profile --device cpu "$@" --json --replace -o "$OUT/$name.json" > /dev/null
}

run_mem() {  # the same, between two quick DRAM probes, RAFTER_BENCH_ROUNDS times
  local name=$1; shift
  for round in $(seq "${RAFTER_BENCH_ROUNDS:-3}"); do
    dram_probe "$OUT/$name.r$round.before.json"
    run "$name.r$round" "$@"
    dram_probe "$OUT/$name.r$round.after.json"
  done
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
import json, sys, glob, os, re, statistics
out, machine = sys.argv[1], sys.argv[2]
# DRAM write fraction of each operator's traffic (writes / all bytes, from docs/operators.md).
WRITE_FRACTION = {("residual_add", "fwd"): 1/3, ("rmsnorm", "fwd"): 1/2, ("rmsnorm", "bwd"): 1/3,
                  ("swiglu", "fwd"): 1/3, ("softmax", "fwd"): 1/2, ("rope", "fwd"): 1/2, ("embedding", "fwd"): 1/2,
                  ("cross_entropy", "fwd"): 0.0, ("cross_entropy", "bwd"): 1/2, ("adamw", "step"): 1/2,
                  ("dequantize", "fwd"): 0.78, ("quantize", "fwd"): 0.12, ("attention_decode", "fwd"): 0.0}

def ceilings(path):
    return [c for c in json.load(open(path))["ceilings"] if c["device"] == "cpu" and c.get("scope") == "device"]

def best(cs, kind, resource, operation=None):
    vals = [c for c in cs if c["kind"] == kind and c["resource"] == resource
            and (operation is None or c.get("operation") == operation)]
    return max(vals, key=lambda c: c["figure"]["value"]) if vals else None

m = ceilings(machine)
dram = best(m, "bandwidth", "DRAM")
dv = dram["figure"]["value"] if dram else float("nan")
seen = [dv] if dram else []
rows = ["| operator | precision | shape | median | min–max | achieved | f | vs matched paired reference (read / copy) | vs best paired | vs adjacent probes | vs full probe | rounds (matched) | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
gemm, mem = [], {}
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
        gemm.append(f'| gemm | {r["precision"]} | {shape} | {timing} | {ach/1e9:.1f} GFLOP/s | - '
                    f'| {ach/cv:.0%} of {cv/1e9:.1f} GFLOP/s ({ceil["isa"] if ceil else "none"}, compute ceiling) | - | - | - | - | {check} |')
        continue
    adj = []
    for side in ("before", "after"):
        p = f[:-5] + f".{side}.json"
        if os.path.exists(p):
            c = best(ceilings(p), "bandwidth", "DRAM")
            if c: adj.append(c["figure"]["value"])
    seen += adj
    b = next((x["bytes"] for x in r["bytes"] if x["level"] == "DRAM"), r["compulsory_bytes"])
    ach = b / med
    ref = r.get("details", {}).get("dram_reference")
    wf = WRITE_FRACTION.get((r["op"], r["phase"]), 0.5)
    if ref:
        rd, cp = ref["read_bytes_per_second"]["median"], ref["copy_bytes_per_second"]["median"]
        matched = rd + (cp - rd) * min(1.0, 2 * wf)
        best_ref = ref["bytes_per_second"]["median"]
    else:
        rd = cp = matched = best_ref = float("nan")
    name = re.sub(r"\.r\d+$", "", base[:-5])
    mem.setdefault(name, []).append(dict(r=r, shape=shape, timing=timing, ach=ach, wf=wf, rd=rd, cp=cp,
                                         matched=matched, best=best_ref, adj=adj, check=check))
top = max(seen) if seen else float("nan")
rows += gemm
for name, rounds in sorted(mem.items()):
    effs = [x["ach"] / x["matched"] for x in rounds]
    pick = sorted(rounds, key=lambda x: x["ach"] / x["matched"])[len(rounds) // 2]  # the median round
    r, adj = pick["r"], pick["adj"]
    adj_txt = " / ".join(f"{a/1e9:.1f}" for a in adj)
    rows.append(f'| {r["op"]} {r["phase"]} | {r["precision"]} | {pick["shape"]} | {pick["timing"]} | {pick["ach"]/1e9:.1f} GB/s '
                f'| {pick["wf"]:.2f} | **{pick["ach"]/pick["matched"]:.0%}** of {pick["matched"]/1e9:.1f} ({pick["rd"]/1e9:.1f} / {pick["cp"]/1e9:.1f}) '
                f'| {pick["ach"]/pick["best"]:.0%} of {pick["best"]/1e9:.1f} '
                f'| {pick["ach"]/max(adj):.0%} of {max(adj)/1e9:.1f} ({adj_txt}) | {pick["ach"]/dv:.0%} of {dv/1e9:.1f} '
                f'| {" ".join(f"{e:.0%}" for e in effs)} | {pick["check"]} |')
rows.append("")
rows.append(f"DRAM ceilings (all cores, best operation): full probe {dv/1e9:.1f} GB/s (best of its trials); quick probes "
            f"around the operators {min(seen)/1e9:.1f}–{top/1e9:.1f} GB/s. Bytes are the operator's analytic DRAM traffic. "
            f"Paired reference: rafter's own all-core read of 256 MiB and all-core non-temporal copy of 128 MiB, timed right "
            f"before each repeat (run.json details.dram_reference); matched = read + (copy − read)·min(1, 2f).")
open(os.path.join(out, "table.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
