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
# Working sets (totals over the threads, as likwid's -w S0:<size>:<threads> takes them): the power
# of two at or below half of one L1 per thread, half of one L2 per thread, a quarter of the L3, and
# 16x the L3 for DRAM. Powers of two because rafter's quick sweep holds every power of two (and its
# largest working set, the DRAM row's): rafter's figure is the median of its sweep point at exactly
# that working set (a 48 KiB L1 gives 16 KiB, not 24), likwid's the MByte/s or MFlops/s it prints
# (1 MByte = 1e6 bytes).
# On a virtual machine the hypervisor may run other guests on these cores while either tool
# measures: every run's steal (the share of the time the CPUs wanted to run that /proc/stat counts
# as stolen) is printed beside its figure, so that a round lost to steal reads as such.
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
pow2_at_most() { local p=1; while (( p * 2 <= $1 )); do p=$(( p * 2 )); done; echo $p; }
ws_for() {  # level threads -> total working set in bytes
  case $1 in
    L1) echo $(( $(pow2_at_most $(( L1 / 2 ))) * $2 )) ;;
    L2) echo $(( $(pow2_at_most $(( L2 / 2 ))) * $2 )) ;;
    L3) pow2_at_most $(( L3 / 4 )) ;;
    DRAM) echo $(( L3 * 16 )) ;;
  esac
}
MAXWS=$(( L3 * 16 ))
# ISA=avx2 holds both tools to 256-bit kernels on an AVX-512 host (the AVX2 rows without an AVX2-only box).
ISA_LOAD=load_avx512; ISA_PEAK=peakflops_avx512_fma; RAFTER_ISA=avx512
if [ "${ISA:-}" = avx2 ] || ! grep -q avx512f /proc/cpuinfo; then
  ISA_LOAD=load_avx; ISA_PEAK=peakflops_avx_fma; RAFTER_ISA=avx2
fi

ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $9; exit }' /proc/stat; }  # busy steal
# "busy steal" before, after -> percent of the wanted CPU time stolen ("-" when unknown), as rafter
# records it (collector's steal_fraction): one tick off for /proc/stat's rounding, a lower bound.
steal() {
  echo "$1 $2" | awk '{ b = $3 - $1; s = $4 - $2; if (b + s > 0) printf "%.1f\n", 100 * (s > 1 ? s - 1 : 0) / (b + s); else print "-" }'
}
likwid() {  # kernel bytes threads field round -> "value steal%", value in B/s or FLOP/s
  local kb=$(( $2 / 1024 ))
  local log="$OUT/likwid-$1-$kb-$3-r$5.txt" t0
  t0=$(ticks)
  likwid-bench -t "$1" -w "S0:${kb}kB:$3" > "$log" 2>&1 || { echo "nan -"; return; }
  echo "$(awk -v f="$4:" '$1 == f { printf "%.6g\n", $2 * 1e6 }' "$log") $(steal "$t0" "$(ticks)")"
}

ROWS="$OUT/rows.tsv"
: > "$ROWS"
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS: rafter (bandwidth + compute, --isa $RAFTER_ISA, sweep up to $MAXWS bytes) ..." >&2
  t0=$(ticks)
  "$RAFTER" probe --device cpu --quick --filter 'cpu\.(bandwidth|compute)' --isa "$RAFTER_ISA" \
    --max-working-set "$MAXWS" -o "$OUT/machine-r$round.json" > "$OUT/rafter-r$round.txt"
  steal "$t0" "$(ticks)" > "$OUT/rafter-steal-r$round.txt"
  for threads in 1 "$CORES"; do
    for level in L1 L2 L3 DRAM; do
      ws=$(ws_for $level "$threads")
      echo "round $round/$ROUNDS: likwid-bench $ISA_LOAD $level $ws B $threads thread(s) ..." >&2
      read -r value stolen < <(likwid $ISA_LOAD "$ws" "$threads" MByte/s "$round")
      echo -e "$round\tload\t$level\t$threads\t$ws\t$value\t$stolen" >> "$ROWS"
    done
    ws=$(ws_for L1 "$threads")
    read -r value stolen < <(likwid $ISA_PEAK "$ws" "$threads" MFlops/s "$round")
    echo -e "$round\tfp64_fma\t-\t$threads\t$ws\t$value\t$stolen" >> "$ROWS"
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
def rafter_steal(m, rnd, kind):  # percent over the probe that measured the row (cpu.bandwidth, cpu.compute)
    for c in m["ceilings"]:
        if c["kind"] == kind and c.get("clocks", {}).get("steal_fraction") is not None:
            return f"{100 * c['clocks']['steal_fraction']:.1f}"
    return open(f"{out}/rafter-steal-r{rnd}.txt").read().strip()  # the whole run's
best = {}
for line in open(rows):
    rnd, what, level, threads, ws, lk, lsteal = line.rstrip("\n").split("\t")
    rnd, threads, ws, lk = int(rnd), int(threads), int(ws), float(lk)
    m = machines[rnd]
    r, rws = rafter_load(m, ws, threads) if what == "load" else (rafter_fma(m, threads), ws)
    key = (what, level, threads, ws)
    b = best.setdefault(key, {"rafter": [], "likwid": [], "steal": [], "rws": rws})
    b["rafter"].append(r)
    b["likwid"].append(lk)
    b["steal"].append(f"{rafter_steal(m, rnd, 'bandwidth' if what == 'load' else 'compute')}/{lsteal}")
print(f"{'figure':<10}{'level':<6}{'threads':>8}{'working set':>14}{'rafter best':>17}{'likwid best':>17}{'ratio':>7}   rafter / likwid per round (steal %, rafter / likwid)")
order = sorted(best, key=lambda k: (k[2], k[0] != "load", ["L1", "L2", "L3", "DRAM", "-"].index(k[1])))
for key in order:
    what, level, threads, ws = key
    b = best[key]
    unit = "GB/s" if what == "load" else "GFLOP/s"
    r, lk = max(b["rafter"]), max(b["likwid"])
    rounds_txt = " ".join(f"{x/1e9:.0f}/{y/1e9:.0f} ({st})" for x, y, st in zip(b["rafter"], b["likwid"], b["steal"]))
    print(f"{what:<10}{level:<6}{threads:>8}{b['rws']/1024:>10.0f} KiB{r/1e9:>10.1f} {unit:<7}{lk/1e9:>9.1f} {unit:<7}{r/lk:>6.2f}   {rounds_txt}")
PY
echo "(logs in $OUT)" >&2
