#!/usr/bin/env bash
# Issue 16's NCCL collectives in ONE device call: build rafter (the rafter target), run the NCCL
# backend's check and timing (rafter profile --op <collective> on every local GPU, single-process
# launch, --quick) at 1 MiB, 64 MiB and 1 GiB, the comm.nccl probe (--quick), and torch.distributed over NCCL
# with as many ranks as `nvidia-smi -L` lists GPUs as the peer: bench/collectives_vs_torch.py prints
# the table (time, algbw, busbw, rafter/torch). Logs and JSON under $OUT (or /tmp/collectives).
# On the device machine, from the repository root, carrying .device-debs (bench/device_build.sh):
#   bash bench/collectives_vs_torch.sh [build-dir]
# STAGES (default "build profile probe torch") picks a subset.
set -uo pipefail
build=${1:-build-dev}
out=${OUT:-/tmp/collectives}
stages=${STAGES:-build profile probe torch}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source bench/device_prelude.sh
rafter="$build/apps/rafter/rafter"
export RAFTER_BUILD_TARGETS="rafter"
build_or_env -DRAFTER_TESTS=OFF || exit 1
gpus=$(nvidia-smi -L | grep -c '^GPU')
echo "GPUs: $gpus"
sizes="1048576 67108864 1073741824"  # bytes of the full buffer S
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
  timeout 150 python3 bench/collectives_vs_torch.py --gpus "$gpus" --sizes $sizes --rafter-dir "$out" \
    --json "$out/torch.json" 2>&1 | tail -60
  stamp "torch"
fi
