#!/usr/bin/env bash
# Issue 16's NCCL collectives in ONE device call: build rafter (the rafter target), run the NCCL
# backend's check and timing (rafter profile --op <collective> on every local GPU, single-process
# launch, --quick) at 1 MiB ... 1 GiB (x4; SIZES), the comm.nccl probe (--quick), and
# torch.distributed over NCCL with as many ranks as `nvidia-smi -L` lists GPUs as the peer:
# bench/collectives_vs_torch.py prints the table (time, algbw, busbw, rafter/torch, NCCL's choice)
# and, with 2 GPUs or more, issue 16's targets met or missed. Logs and JSON under $OUT (or
# /tmp/collectives).
# On the device machine, from the repository root, carrying .device-debs (bench/device_build.sh):
#   bash bench/collectives_vs_torch.sh [build-dir]
# With 2 GPUs or more and mpirun, stage tp runs the Llama-2 7B prefill step with --tp 2 under
# mpirun (one process per GPU, each its shard; the all-reduces over NCCL) and prints its records.
# Stage p2p (2 GPUs or more): cuda.links' peer copies (write, read, both ways, 8-byte latency, the
# link NVML names) beside torch's device-to-device copy between cuda:0 and cuda:1 (x.copy_ of
# 256 MiB, CUDA events, median of 20).
# Stage overlap (2 GPUs or more, mpirun): ZeRO-3's per-layer all-gathers and reduce-scatters of the
# Llama-2 7B training step (seq 4096, --zero 3 --dp 2, one process per GPU), each beside a BF16 GEMM
# of its layer's linear FLOPs (details.overlap), then the same pairs in torch.distributed +
# torch.matmul (bench/overlap_vs_torch.py).
# Stage report (after tp): the GPU's ceilings (cuda.bandwidth, tensor, fma, shared, launch; --quick)
# and comm.nccl's full sweep into one machine.json, then `rafter report` of the TP=2 step against it:
# the all-reduces on nccl:2 all_reduce's measured busbw and latency, the rest on the GPU's roofs.
# STAGES (default "build profile probe torch tp p2p overlap report") picks a subset.
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/collectives}
stages=${STAGES:-build profile probe torch tp p2p overlap report}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/device_prelude.sh
rafter="$build/apps/rafter/rafter"
export RAFTER_BUILD_TARGETS="rafter"
build_or_env -DRAFTER_TESTS=OFF || exit 1
gpus=$(nvidia-smi -L | grep -c '^GPU')
echo "GPUs: $gpus"
sizes=${SIZES:-"1048576 4194304 16777216 67108864 268435456 1073741824"}  # bytes of the full buffer S, 1 MiB to 1 GiB
if has profile; then
  for op in all_reduce all_gather reduce_scatter all_to_all send_recv; do
    for dtype in bf16 fp32; do
      for bytes in $sizes; do
        [ "$dtype" = bf16 ] && e=$(( bytes / 2 )) || e=$(( bytes / 4 ))
        timeout 60 "$rafter" profile --op $op --dtype $dtype --device cuda:0 --shape elements=$e,ranks=$gpus \
          --quick -o "$out/profile.$op.$dtype.$bytes.json" >>"$out/profile.log" 2>&1 \
          || echo "profile $op $dtype $bytes: exit $?"
      done
    done
  done
  stamp "profiled"
fi
if has probe; then
  timeout 120 "$rafter" probe --device cuda --filter comm.nccl --quick -o "$out/machine.json" >"$out/probe.log" 2>&1
  echo "probe: exit $?"; tail -30 "$out/probe.log"
  stamp "probed"
fi
if has torch; then
  timeout 240 python3 bench/collectives_vs_torch.py --gpus "$gpus" --sizes $sizes --rafter-dir "$out" \
    --json "$out/torch.json" 2>&1 | tail -60
  stamp "torch"
fi
if has tp && [ "$gpus" -ge 2 ] && command -v mpirun >/dev/null; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun -np 2 --bind-to none \
    "$rafter" profile --device cuda --model llama2-7b --phase prefill --seq 4096 --tp 2 --quick \
    -o "$out/tp2.json" >"$out/tp2.log" 2>&1
  echo "tp 2: exit $?"; tail -40 "$out/tp2.log"
  python3 - "$out/tp2.json" <<'PY'
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
    --filter '^zero3[.]layer' --quick -o "$out/zero3.json" >"$out/zero3.log" 2>&1
  echo "zero3 step (mpirun -np 2): exit $?"; tail -8 "$out/zero3.log"
  timeout 240 python3 bench/overlap_vs_torch.py --gpus 2 "$out/zero3.json" 2>&1 | tail -12
  stamp "overlap"
fi
if has report && [ -f "$out/tp2.json" ]; then
  timeout 240 "$rafter" probe --device cuda:0 --quick --filter '^cuda[.](bandwidth|tensor|fma|shared|launch)$' \
    -o "$out/machine-gpu.json" >"$out/probe-gpu.log" 2>&1; echo "GPU probes: exit $?"
  timeout 120 "$rafter" probe --device cuda --filter '^comm[.]nccl$' -o "$out/machine-comm.json" \
    >"$out/probe-comm.log" 2>&1; echo "comm.nccl (full sweep): exit $?"
  python3 - "$out/machine-gpu.json" "$out/machine-comm.json" "$out/machine-step.json" <<'PY'
import json, sys
gpu, comm = (json.load(open(p)) for p in sys.argv[1:3])
gpu["ceilings"] += [c for c in comm["ceilings"] if c["device"] == "cuda:0"]
json.dump(gpu, open(sys.argv[3], "w"), indent=1)
PY
  "$rafter" report -m "$out/machine-step.json" "$out/tp2.json" 2>&1 | grep -v "^note: .*no bandwidth roof" | head -40
  stamp "report"
fi
