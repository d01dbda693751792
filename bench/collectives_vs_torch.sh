#!/usr/bin/env bash
# Issues 16 and 17's NCCL collectives in ONE device call: build rafter (the rafter target), run the
# NCCL backend's check and timing (rafter profile --op <collective> over the first n local GPUs,
# single-process launch, --quick) at 1 MiB ... 1 GiB (x4; SIZES) for every rank count n in RANKS
# (default 2, 4, 8 … below the GPUs `nvidia-smi -L` lists, then all of them), the comm.nccl probe
# (--quick; one sweep per rank count), and torch.distributed over NCCL with n ranks as the peer:
# bench/collectives_vs_torch.py prints one table per n (time, algbw, busbw, rafter/torch, NCCL's
# choice) and, with 2 ranks or more, issue 16's targets met or missed. LAUNCHES="single mpirun" times
# rafter's collectives a second time as torch runs them, one process per GPU under mpirun. Stage topo records the
# GPUs' links (nvidia-smi topo -m, NVLink status). Logs and JSON under $OUT (or /tmp/collectives).
# On the device machine, from the repository root, carrying .device-debs (bench/device_build.sh):
#   bash bench/collectives_vs_torch.sh [build-dir]
# With 2 GPUs or more and mpirun, stage tp runs a model step (TP_MODEL, default llama2-7b; TP_PHASE,
# default prefill; TP_SEQ, default 4096) with --tp TP (default: every GPU) under mpirun (one process
# per GPU, each its shard; the all-reduces over NCCL) and prints its all-reduces and their share.
# Stage p2p (2 GPUs or more): cuda.links' peer copies (write, read, both ways, 8-byte latency, the
# link NVML names) beside torch's device-to-device copy between cuda:0 and cuda:1 (x.copy_ of
# 256 MiB, CUDA events, median of 20).
# Stage overlap (2 GPUs or more, mpirun): ZeRO-3's per-layer all-gathers and reduce-scatters of the
# Llama-2 7B training step (seq 4096, --zero 3 --dp 2, one process per GPU), each beside a BF16 GEMM
# of its layer's linear FLOPs (details.overlap), then the same pairs in torch.distributed +
# torch.matmul (bench/overlap_vs_torch.py).
# Stage report (after tp): the GPU's ceilings (cuda.bandwidth, tensor, fma, shared, launch; --quick)
# and comm.nccl's full sweep (under mpirun -np TP, the step's launch) into one machine.json, then
# `rafter report` of the TP step against it: the all-reduces on nccl:<TP> all_reduce's measured
# busbw and latency, the rest on the GPU's roofs; and of the grid's collectives where stage grid ran.
# STAGES (default "build topo profile probe torch tp p2p overlap report") picks a subset.
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/collectives}
stages=${STAGES:-build topo profile probe torch tp p2p overlap report}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/device_prelude.sh
rafter="$build/apps/rafter/rafter"
export RAFTER_BUILD_TARGETS="rafter"
build_or_env -DRAFTER_TESTS=OFF || exit 1
gpus=$(nvidia-smi -L | grep -c '^GPU')
echo "GPUs: $gpus"
if [ -z "${RANKS:-}" ]; then  # probes/comm/comm_sweep.cpp's rank_counts
  RANKS=""; for (( n = 2; n < gpus; n *= 2 )); do RANKS="$RANKS $n"; done; RANKS="$RANKS $gpus"
fi
echo "rank counts: $RANKS"
sizes=${SIZES:-"1048576 4194304 16777216 67108864 268435456 1073741824"}  # bytes of the full buffer S, 1 MiB to 1 GiB
if has topo; then
  nvidia-smi topo -m 2>&1 | tee "$out/topo.txt"
  nvidia-smi nvlink --status -i 0 2>&1 | head -24 | tee "$out/nvlink0.txt"
  stamp "topo"
fi
launches=${LAUNCHES:-single}  # "single mpirun": also one process per GPU under mpirun, as torch runs
mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --bind-to none)
if has profile; then
  for launch in $launches; do
    for n in $RANKS; do
      if [ "$launch" = mpirun ]; then cmd=("${mpi[@]}" -np "$n" "$rafter"); dev=cuda; suffix=.mpi
      else cmd=("$rafter"); dev=cuda:0; suffix=; fi
      for op in all_reduce all_gather reduce_scatter all_to_all send_recv; do
        for dtype in bf16 fp32; do
          for bytes in $sizes; do
            [ "$dtype" = bf16 ] && e=$(( bytes / 2 )) || e=$(( bytes / 4 ))
            timeout 60 "${cmd[@]}" profile --op $op --dtype $dtype --device "$dev" --shape "elements=$e,ranks=$n" \
              --quick --replace -o "$out/profile.$op.$dtype.$bytes.r$n$suffix.json" >>"$out/profile.log" 2>&1 \
              || echo "profile $op $dtype $bytes ranks $n ($launch): exit $?"
          done
        done
      done
      stamp "profiled over $n ranks ($launch)"
    done
  done
fi
if has probe; then
  timeout 120 "$rafter" probe --device cuda --filter comm.nccl --quick -o "$out/machine.json" >"$out/probe.log" 2>&1
  echo "probe: exit $?"; tail -30 "$out/probe.log"
  stamp "probed"
fi
if has torch; then
  for n in $RANKS; do
    timeout 240 python3 bench/collectives_vs_torch.py --gpus "$n" --sizes $sizes --rafter-dir "$out" \
      --json "$out/torch.r$n.json" 2>&1 | tail -70
    stamp "torch over $n ranks"
  done
fi
tp=${TP:-$gpus}
tp_json="$out/tp$tp.json"
if has tp && [ "$tp" -ge 2 ] && command -v mpirun >/dev/null; then
  timeout "${TP_TIMEOUT:-300}" "${mpi[@]}" -np "$tp" "$rafter" profile --device cuda \
    --model "${TP_MODEL:-llama2-7b}" --phase "${TP_PHASE:-prefill}" --seq "${TP_SEQ:-4096}" --tp "$tp" --quick --replace -o "$tp_json" >"$out/tp$tp.log" 2>&1
  echo "${TP_MODEL:-llama2-7b} ${TP_PHASE:-prefill} tp $tp: exit $?"; tail -60 "$out/tp$tp.log"
  python3 - "$tp_json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for r in run["records"]:
    if r["op"] == "all_reduce":
        t = r.get("time", {}).get("value")
        print(r["label"], r["status"], f"{t * 1e6:.1f} us" if t else "-", r.get("details", {}).get("nccl_choice"))
secs = lambda rs: sum(r["time"]["value"] * r["count"] for r in rs if r.get("time"))
comm = [r for r in run["records"] if r["op"] == "all_reduce"]
total = secs(run["records"])
print(f"rank 0's step: {total * 1e3:.2f} ms of which all-reduce {secs(comm) * 1e3:.2f} ms"
      f" ({100 * secs(comm) / total if total else 0:.1f} %)")
PY
  stamp "tp"
fi
# Stage grid (4 GPUs or more, mpirun; not in the default): the TP×DP grid's collectives of a
# training step (GRID_MODEL, default llama2-7b), --tp GRID_TP (default GPUS/2) --dp GPUS/GRID_TP
# --zero 1: TP all-reduces over consecutive ranks, the ZeRO reduce-scatter and all-gather over ranks
# GRID_TP apart (stride), every group at once. On eight GPUs (issue 17):
#   TP=8 TP_MODEL=llama2-70b TP_PHASE=train GRID_MODEL=llama2-70b GRID_TP=4 \
#   STAGES="tp grid report" bash bench/collectives_vs_torch.sh   (after a call with stage build)
grid_tp=${GRID_TP:-$(( gpus / 2 ))}
if has grid && [ "$gpus" -ge 4 ] && command -v mpirun >/dev/null; then
  timeout "${GRID_TIMEOUT:-300}" "${mpi[@]}" -np "$gpus" "$rafter" profile --device cuda --model "${GRID_MODEL:-llama2-7b}" \
    --phase train --seq 4096 --tp "$grid_tp" --dp $(( gpus / grid_tp )) --zero 1 \
    --filter 'all_reduce|reduce_scatter|all_gather' --quick --replace -o "$out/grid.json" >"$out/grid.log" 2>&1
  echo "grid (${GRID_MODEL:-llama2-7b}, tp $grid_tp x dp $(( gpus / grid_tp )), zero 1): exit $?"; tail -14 "$out/grid.log"
  stamp "grid"
fi
if has p2p && [ "$gpus" -ge 2 ]; then
  timeout 180 "$rafter" probe --device cuda:0 --filter cuda.links -o "$out/links.json" >"$out/links.log" 2>&1
  echo "links probe: exit $?"
  python3 - "$out/links.json" <<'PY'
import json, sys
import torch
rows = [c for c in json.load(open(sys.argv[1]))["ceilings"] if c["resource"].startswith("p2p_")]
for c in rows:
    f, p = c["figure"], c["params"]
    v = f"{f['value'] * 1e6:.2f} us" if c["kind"] == "latency" else f"{f['value'] / 1e9:.1f} GB/s"
    sheet = f"{c['datasheet']['value'] / 1e9:.0f} GB/s" if c.get("datasheet") else "-"
    print(f"rafter {c['resource']} {c['operation']:<18} {c['kind']:<9} {v:>12}  datasheet {sheet}  link {p.get('link')}")
n = 256 << 20
x = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda:0")
y = torch.empty(n, dtype=torch.uint8, device="cuda:1")
times = []
for _ in range(25):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); y.copy_(x); b.record(); b.synchronize()
    times.append(a.elapsed_time(b) / 1e3)
t = sorted(times[5:])[len(times[5:]) // 2]
print(f"torch cuda:0 -> cuda:1 copy_ of 256 MiB: {n / t / 1e9:.1f} GB/s (median of 20)")
PY
  stamp "p2p"
fi
if has overlap && [ "$gpus" -ge 2 ] && command -v mpirun >/dev/null; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun -np 2 --bind-to none \
    "$rafter" profile --device cuda --model llama2-7b --phase train --seq 4096 --zero 3 --dp 2 \
    --filter '^zero3[.]layer' --quick --replace -o "$out/zero3.json" >"$out/zero3.log" 2>&1
  echo "zero3 step (mpirun -np 2): exit $?"; tail -8 "$out/zero3.log"
  timeout 240 python3 bench/overlap_vs_torch.py --gpus 2 "$out/zero3.json" 2>&1 | tail -12
  stamp "overlap"
fi
if has report && [ -f "$tp_json" ]; then
  # One profile: the GPU's probes, then comm.nccl merged into it (rafter probe keeps the ceilings
  # of a profile of this host that its run did not re-measure).
  rm -f "$out/machine-step.json"
  timeout 240 "$rafter" probe --device cuda:0 --quick --filter '^cuda[.](bandwidth|tensor|fma|shared|launch)$' \
    -o "$out/machine-step.json" >"$out/probe-gpu.log" 2>&1; echo "GPU probes: exit $?"
  # The step ran one process per GPU: its collectives' roofs come from the same launch (a single
  # process over the GPUs issues every GPU's kernel from one thread: 36 against 25 µs at 4 ranks).
  timeout 120 "${mpi[@]}" -np "$tp" "$rafter" probe --device cuda --filter '^comm[.]nccl$' \
    -o "$out/machine-step.json" >"$out/probe-comm.log" 2>&1; echo "comm.nccl (full sweep, mpirun -np $tp): exit $?"
  grep -h "keeping" "$out/probe-comm.log" || true
  "$rafter" report -m "$out/machine-step.json" "$tp_json" 2>&1 | grep -v "^note: .*no bandwidth roof" | head -70
  # The grid's collectives (stage grid, run before) on the same roofs: TP on nccl:GRID_TP's
  # consecutive groups, the ZeRO ones (stride GRID_TP) on nccl:<data ranks>.
  [ -f "$out/grid.json" ] && "$rafter" report -m "$out/machine-step.json" "$out/grid.json" 2>&1 | head -30
  stamp "report"
fi
