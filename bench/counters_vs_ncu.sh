#!/usr/bin/env bash
# rafter's counted pass (profile --counters: CUPTI range profiler, kernel replay) against Nsight
# Compute on the same kernels, on the device machine after `source bench/device_build.sh BUILD`.
# Both count the kernels of rafter's counted launch: rafter through CUPTI, ncu through the NVTX
# range rafter_counted that wraps that launch (RAFTER_GPU_COUNTERS=off lets ncu hold the counters;
# the launch then runs once, uncounted, in the range). GEMMs use --algo heuristic so that both runs
# pick the same cuBLASLt algorithm. Writes OUT/<op>.{rafter.json,ncu.csv}, OUT/table.txt and the
# wall times of a Llama-2 7B prefill step: plain, with --counters, and with ncu counting.
# Mode variants (after ops; VARIANTS picks them): the same operators counted again by rafter (CUPTI
# kernel replay, a repeat) and by ncu (default cache and clock control, no cache control, a repeat,
# range and application-range replay with or without cache control; range replay cannot collect
# the SASS instruction counts, so those are left out there), one table each (OUT/variants.txt):
# where the two tools' methods differ, which figure moves. ncu_writeback: ncu over a range that also
# holds the read-flush behind the launch, against the HBM writes rafter records (inside + behind).
# Use: bash bench/counters_vs_ncu.sh BUILD OUT [ops|discover|step|variants|all]
set -u
build=${1:-build-dev}
out=${2:-${OUT:-/tmp/counters}}
mode=${3:-all}
rafter=$build/apps/rafter/rafter
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
mkdir -p "$out"
[ -f bench/gpu_operators_env.sh ] && source bench/gpu_operators_env.sh
common=(--device cuda:0 --counters --quick --algo heuristic)
# ncu with clocks not locked (rafter never locks them) and its own cache control (it flushes L2 after
# kernel replay's memory restore, which would otherwise leave the operands in L2: --cache-control none
# read 15 % fewer HBM bytes than rafter for attention on the H100). ncu flushes before each kernel, rafter
# once before the launch: operators of several kernels differ by the reuse between their kernels.
ncu_conditions=${NCU_ARGS:---cache-control all --clock-control none}

if [ "$mode" = discover ] || [ "$mode" = all ]; then
  "$ncu" --version > "$out/ncu_version.txt" 2>&1
  "$ncu" --query-metrics --chip gh100 > "$out/ncu_metrics_gh100.txt" 2>&1
  grep -i tensor "$out/ncu_metrics_gh100.txt" > "$out/ncu_tensor_metrics.txt"
  for d in /usr/local/cuda*/nsight-compute* /opt/nvidia/nsight-compute/* "$(dirname "$(readlink -f "$ncu")")"; do
    ls "$d"/sections/*Roofline* 2>/dev/null
  done | sort -u > "$out/roofline_sections.txt"
  xargs -r grep -h "Name:\|Expression:" < "$out/roofline_sections.txt" | sort -u > "$out/roofline_section_metrics.txt"
fi

declare -A ops=(
  [gemm_bf16_prefill]="--op gemm --dtype bf16 --m 4096 --n 4096 --k 4096"
  [gemm_bf16_decode]="--op gemm --dtype bf16 --m 16 --n 4096 --k 4096"
  [gemm_fp8_prefill]="--op gemm --dtype fp8_e4m3 --m 4096 --n 4096 --k 4096"
  [gemm_fp8_decode]="--op gemm --dtype fp8_e4m3 --m 16 --n 4096 --k 4096"
  [attention_prefill]="--op attention_prefill"
  [rmsnorm]="--op rmsnorm"
  [swiglu]="--op swiglu"
  [softmax]="--op softmax"
  [adamw]="--op adamw"
  [quantize]="--op quantize"
)
names=${OPS:-"gemm_bf16_prefill gemm_bf16_decode gemm_fp8_prefill gemm_fp8_decode attention_prefill rmsnorm swiglu softmax adamw quantize"}

budget=${BUDGET_S:-100000}  # seconds: operators and the step are skipped once this is spent
if [ "$mode" != discover ] && [ "$mode" != step ]; then
  # One traced counted pass first: each CUPTI call and its result (and a backtrace if it crashes).
  RAFTER_CUPTI_TRACE=1 $rafter profile --op rmsnorm "${common[@]}" --replace -o "$out/trace.json" > "$out/trace.txt" 2>&1 ||
    { command -v gdb > /dev/null && RAFTER_CUPTI_TRACE=1 gdb -batch -ex run -ex bt --args $rafter profile --op rmsnorm \
        "${common[@]}" --replace -o "$out/trace.json" >> "$out/trace.txt" 2>&1; }
  for name in $names; do
    [ "$SECONDS" -lt "$budget" ] || { echo "$name: skipped (budget)"; continue; }
    args=${ops[$name]}
    s=$(date +%s.%N)
    $rafter profile $args "${common[@]}" --replace -o "$out/$name.rafter.json" > "$out/$name.rafter.txt" 2>&1
    e=$(date +%s.%N)
    metrics=$(python3 bench/counters_vs_ncu.py metrics "$out/$name.rafter.json") || continue
    RAFTER_GPU_COUNTERS=off "$ncu" $ncu_conditions --nvtx --nvtx-include "rafter_counted/" --metrics "$metrics" \
      --csv --page raw --print-units base --log-file "$out/$name.ncu.csv" \
      $rafter profile $args "${common[@]}" --replace -o "$out/$name.ncu_run.json" > "$out/$name.ncu_run.txt" 2>&1
    f=$(date +%s.%N)
    echo "$name rafter_wall_s $(awk "BEGIN{print $e - $s}") ncu_wall_s $(awk "BEGIN{print $f - $e}")" | tee -a "$out/walls.txt"
  done
  python3 bench/counters_vs_ncu.py table "$out" $names | tee "$out/table.txt"
fi

if [ "$mode" = variants ] && [ "$SECONDS" -lt "$budget" ]; then
  vops=${VARIANT_OPS:-"rmsnorm softmax gemm_bf16_prefill quantize"}
  # ncu_range / ncu_app_range: ncu measures the whole NVTX range (the launch and its synchronisation)
  # as one result, in-process or by re-running rafter per pass, instead of kernel by kernel.
  declare -A ncu_flags=([ncu_defaults]="--cache-control all --clock-control base"
                        [ncu_cache_none]="--cache-control none --clock-control none"
                        [ncu_range]="--replay-mode range --cache-control all --clock-control none"
                        [ncu_app_range]="--replay-mode app-range --cache-control all --clock-control none"
                        [ncu_app_range_nocache]="--replay-mode app-range --cache-control none --clock-control none"
                        [ncu_writeback]="--replay-mode app-range --cache-control all --clock-control none"
                        [ncu_repeat]="$ncu_conditions")
  # ncu_writeback: the NVTX range also holds the read-flush behind the launch (RAFTER_NVTX_WRITEBACK),
  # so ncu counts the launch's HBM writes with the write-back of the lines it left dirty in L2, as
  # rafter's record does (its range behind the launch); only that figure compares (the flush's own
  # reads are in the range): bench/counters_vs_ncu.py writeback OUT/ncu_writeback NAME...
  declare -A ncu_env=([ncu_writeback]="RAFTER_NVTX_WRITEBACK=1")
  # rafter_*: rafter counts again (kernel replay, or the same mode a second time for its own
  # run-to-run spread) against the first ncu table.
  # rafter_user_range: one CUPTI user range around the launch instead of one auto range per kernel.
  # rafter_cache_none: without CUPTI 13.4's L2 reset before each pass (what CUPTI 13.0 counted).
  declare -A rafter_env=([rafter_kernel_replay]="RAFTER_CUPTI_REPLAY=kernel" [rafter_repeat]="RAFTER_CUPTI_REPLAY=user"
                         [rafter_user_range]="RAFTER_CUPTI_RANGE=user" [rafter_cache_none]="RAFTER_CUPTI_CACHE=none")
  for v in ${VARIANTS:-rafter_kernel_replay ncu_defaults ncu_cache_none}; do
    mkdir -p "$out/$v"
    for name in $vops; do
      [ "$SECONDS" -lt "$budget" ] || break
      args=${ops[$name]}
      if [ -n "${rafter_env[$v]:-}" ]; then
        env ${rafter_env[$v]} $rafter profile $args "${common[@]}" --replace -o "$out/$v/$name.rafter.json" > "$out/$v/$name.rafter.txt" 2>&1
        ln -sf "../$name.ncu.csv" "$out/$v/$name.ncu.csv"
      else
        ln -sf "../$name.rafter.json" "$out/$v/$name.rafter.json"
        metrics=$(python3 bench/counters_vs_ncu.py metrics "$out/$name.rafter.json" \
          $([[ $v == *range* || $v == ncu_writeback ]] && echo --no-sass)) || continue
        env RAFTER_GPU_COUNTERS=off ${ncu_env[$v]:-} timeout ${VARIANT_TIMEOUT_S:-240} "$ncu" ${ncu_flags[$v]} --nvtx --nvtx-include "rafter_counted/" \
          --metrics "$metrics" --csv --page raw --print-units base --log-file "$out/$v/$name.ncu.csv" \
          $rafter profile $args "${common[@]}" --replace -o "$out/$v/$name.ncu_run.json" > "$out/$v/$name.ncu_run.txt" 2>&1
      fi
    done
    echo "### $v" >> "$out/variants.txt"
    if [ "$v" = ncu_writeback ]; then python3 bench/counters_vs_ncu.py writeback "$out/$v" $vops >> "$out/variants.txt"
    else python3 bench/counters_vs_ncu.py table "$out/$v" $vops >> "$out/variants.txt"; fi
  done
fi

if { [ "$mode" = step ] || [ "$mode" = all ]; } && [ "$SECONDS" -lt "$budget" ]; then
  step=(profile --model llama2-7b --phase prefill --device cuda:0 --quick --algo heuristic)
  t() { local s; s=$(date +%s.%N); "$@" > /dev/null 2>&1; awk "BEGIN{print $(date +%s.%N) - $s}"; }
  plain=$(t $rafter "${step[@]}" --replace -o "$out/step_plain.json")
  counted=$(t $rafter "${step[@]}" --counters --replace -o "$out/step_counted.json")
  metrics=$(python3 bench/counters_vs_ncu.py metrics "$out/step_counted.json")
  ncu_t=$(t env RAFTER_GPU_COUNTERS=off "$ncu" $ncu_conditions --nvtx --nvtx-include "rafter_counted/" --metrics "$metrics" \
    --csv --page raw --print-units base --log-file "$out/step.ncu.csv" $rafter "${step[@]}" --counters --replace -o "$out/step_ncu.json")
  python3 - "$out" "$plain" "$counted" "$ncu_t" <<'PY' | tee "$out/step.txt"
import json, sys
out, plain, counted, ncu_t = sys.argv[1], *map(float, sys.argv[2:])
recs = json.load(open(f"{out}/step_counted.json"))["records"]
cs = sum(r.get("details", {}).get("counters", {}).get("seconds", 0) for r in recs)
print(f"Llama-2 7B prefill step: plain {plain:.1f} s, --counters {counted:.1f} s "
      f"(counted passes {cs:.1f} s), under ncu {ncu_t:.1f} s; counting cost: rafter {counted - plain:.1f} s, "
      f"ncu {ncu_t - plain:.1f} s")
# Timing stays uncounted: each record's time with --counters against the plain run's.
plain_t = {r["label"]: r["time"]["value"] for r in json.load(open(f"{out}/step_plain.json"))["records"] if r.get("time")}
ratios = sorted(r["time"]["value"] / plain_t[r["label"]] for r in recs if r.get("time") and plain_t.get(r["label"]))
if ratios:
    print(f"record time with --counters / plain: median {ratios[len(ratios) // 2]:.3f}, "
          f"range {ratios[0]:.3f}-{ratios[-1]:.3f} over {len(ratios)} records")
PY
fi
