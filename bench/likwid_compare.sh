#!/usr/bin/env bash
# rafter vs likwid-bench, in one go, on the same working sets and thread counts: load bandwidth in
# L1, L2, L3 and DRAM and the FP64 FMA peak, on 1 thread and on all cores. Prints a table of
# rafter/likwid ratios (rafter must not under-report: aim >= 1.0 on every row).
#
#   [ISA=avx2] bench/likwid_compare.sh [RAFTER_BINARY] [OUT_DIR] [ROUNDS]
#
# Each round runs rafter (quick sweep: every power of two, fewer repeats) and then likwid-bench on
# every row; the table keeps each tool's best round, so that a round disturbed by another process
# (on a shared machine) penalises neither tool. ROUNDS defaults to 3.
# Working sets (totals over the threads, as likwid's -w S0:<size>:<threads> takes them): half of
# one L1 per thread, half of one L2 per thread, a quarter of the L3, and 16x the L3 for DRAM.
# rafter's figure is the median of its sweep point at exactly that working set (its default sweep
# holds every power of two), likwid's the MByte/s or MFlops/s it prints (1 MByte = 1e6 bytes).
# On the device machine's host (no likwid there): `apt-get download likwid liblua5.3-0` here, carry
# the debs, and there `dpkg -x DEB /` each and `ldconfig` (unpacked elsewhere, likwid-bench stops:
# it looks for its access daemon where Debian installs it). A 16-core Sapphire Rapids host with a
# 300 MiB L3 takes about 230 s a round (16x the L3 for DRAM: 4.8 GB).
set -euo pipefail

RAFTER=${1:-${RAFTER:-build/apps/rafter/rafter}}
OUT=${2:-$(mktemp -d /tmp/rafter-likwid-XXXXXX)}
ROUNDS=${3:-3}
mkdir -p "$OUT"
command -v likwid-bench >/dev/null || { echo "likwid-bench not found: apt-get install likwid" >&2; exit 2; }
[ -x "$RAFTER" ] || { echo "rafter binary not found at $RAFTER" >&2; exit 2; }

# Cache sizes and cores from rafter's own hwloc view.
"$RAFTER" topology --json > "$OUT/topology.json"
read -r CORES L1 L2 L3 < <(python3 - "$OUT/topology.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
size = {c["level"]: int(c["size_bytes"]) for c in t["caches"]}
print(t["cores"], size.get("L1", 32768), size.get("L2", 1 << 20), size.get("L3", 32 << 20))
PY
)
ws_for() {  # level threads -> total working set in bytes
  case $1 in
    L1) echo $(( L1 / 2 * $2 )) ;;
    L2) echo $(( L2 / 2 * $2 )) ;;
    L3) echo $(( L3 / 4 )) ;;
    DRAM) echo $(( L3 * 16 )) ;;
  esac
}
MAXWS=$(( L3 * 16 ))
# ISA=avx2 holds both tools to 256-bit kernels on an AVX-512 host (the AVX2 rows without an AVX2-only box).
ISA_LOAD=load_avx512; ISA_PEAK=peakflops_avx512_fma; RAFTER_ISA=avx512
if [ "${ISA:-}" = avx2 ] || ! grep -q avx512f /proc/cpuinfo; then
  ISA_LOAD=load_avx; ISA_PEAK=peakflops_avx_fma; RAFTER_ISA=avx2
fi

likwid() {  # kernel bytes threads field round -> value in B/s or FLOP/s
  local kb=$(( $2 / 1024 ))
  local log="$OUT/likwid-$1-$kb-$3-r$5.txt"
  likwid-bench -t "$1" -w "S0:${kb}kB:$3" > "$log" 2>&1 || { echo nan; return; }
  awk -v f="$4:" '$1 == f { printf "%.6g\n", $2 * 1e6 }' "$log"
}

ROWS="$OUT/rows.tsv"
: > "$ROWS"
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS: rafter (bandwidth + compute, --isa $RAFTER_ISA, sweep up to $MAXWS bytes) ..." >&2
  "$RAFTER" probe --device cpu --quick --filter 'cpu\.(bandwidth|compute)' --isa "$RAFTER_ISA" \
    --max-working-set "$MAXWS" -o "$OUT/machine-r$round.json" > "$OUT/rafter-r$round.txt"
  for threads in 1 "$CORES"; do
    for level in L1 L2 L3 DRAM; do
      ws=$(ws_for $level "$threads")
      echo "round $round/$ROUNDS: likwid-bench $ISA_LOAD $level $ws B $threads thread(s) ..." >&2
      echo -e "$round\tload\t$level\t$threads\t$ws\t$(likwid $ISA_LOAD "$ws" "$threads" MByte/s "$round")" >> "$ROWS"
    done
    ws=$(ws_for L1 "$threads")
    echo -e "$round\tfp64_fma\t-\t$threads\t$ws\t$(likwid $ISA_PEAK "$ws" "$threads" MFlops/s "$round")" >> "$ROWS"
    [ "$CORES" = 1 ] && break
  done
done

python3 - "$OUT" "$ROWS" "$RAFTER_ISA" "$ROUNDS" <<'PY'
import json, math, sys
out, rows, isa, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
machines = {r: json.load(open(f"{out}/machine-r{r}.json")) for r in range(1, rounds + 1)}
def rafter_load(m, ws, threads):
    for s in m["sweeps"]:
        if s["probe"] == "bandwidth" and s["operation"] == "load" and s["threads"] == threads:
            p = min(s["points"], key=lambda p: abs(p["working_set_bytes"] - ws))
            return p["figure"]["value"], p["working_set_bytes"]
    return math.nan, ws
def rafter_fma(m, threads):
    for c in m["ceilings"]:
        if c["kind"] == "compute" and c["resource"] == "fp64" and c["isa"] == isa and c["threads"] == threads:
            return c["figure"]["value"]
    return math.nan
best = {}
for line in open(rows):
    rnd, what, level, threads, ws, lk = line.rstrip("\n").split("\t")
    rnd, threads, ws, lk = int(rnd), int(threads), int(ws), float(lk)
    m = machines[rnd]
    r, rws = rafter_load(m, ws, threads) if what == "load" else (rafter_fma(m, threads), ws)
    key = (what, level, threads, ws)
    b = best.setdefault(key, {"rafter": [], "likwid": [], "rws": rws})
    b["rafter"].append(r)
    b["likwid"].append(lk)
print(f"{'figure':<10}{'level':<6}{'threads':>8}{'working set':>14}{'rafter best':>17}{'likwid best':>17}{'ratio':>7}   rafter / likwid per round")
order = sorted(best, key=lambda k: (k[2], k[0] != "load", ["L1", "L2", "L3", "DRAM", "-"].index(k[1])))
for key in order:
    what, level, threads, ws = key
    b = best[key]
    unit = "GB/s" if what == "load" else "GFLOP/s"
    r, lk = max(b["rafter"]), max(b["likwid"])
    rounds_txt = " ".join(f"{x/1e9:.0f}/{y/1e9:.0f}" for x, y in zip(b["rafter"], b["likwid"]))
    print(f"{what:<10}{level:<6}{threads:>8}{b['rws']/1024:>10.0f} KiB{r/1e9:>10.1f} {unit:<7}{lk/1e9:>9.1f} {unit:<7}{r/lk:>6.2f}   {rounds_txt}")
PY
echo "(logs in $OUT)" >&2
