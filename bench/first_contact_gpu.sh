#!/usr/bin/env bash
# The first-contact issue on the GPU in ONE device call (carry .device-debs; see device_build.sh):
# build with tests; the GPU kernel checks (RoPE's two thread layouts among them) and the CUDA
# probe tests; `rafter probe --device cuda` (every latency's value against its own stats, the console
# table); the Llama-2 7B NVFP4 training step at 4096 tokens (memory planned before it runs: AdamW
# over 6.7 B parameters timed on a slice and scaled, no failed record); `--plan --device cuda`;
# the default job; the decode rows beside PyTorch eager and torch.compile. Everything lands in
# $OUT/first-contact.tgz, the key lines on stdout.
#   bash bench/first_contact_gpu.sh [build-dir]
# STAGES (default all) picks a subset, e.g. two calls of under 10 minutes each on a warm machine:
#   STAGES="build tests probe" ...   then   STAGES="plan train default rows" ...
# Two more stages, not in the default set: "suite" runs the whole ctest suite on the GPU host (every
# GPU test runs instead of skipping, and the CPU tests meet a machine with many cores), "models" every
# model × phase × precision recipe (--quick --algo heuristic) with its report, and prints each run's
# record statuses. A fresh H200: build 155 s, suite about 190 s, models about 90 s.
set -uo pipefail
build=${1:-build-dev}
out=/tmp/first-contact
stages=${STAGES:-build tests probe plan train default rows}
mkdir -p "$out"
# shellcheck disable=SC1091
source bench/device_prelude.sh
export PYTHONUNBUFFERED=1
archive_on_exit first-contact

build_or_env "-DRAFTER_TESTS=ON" || exit 1  # ON: a build folder configured without tests keeps that otherwise
rafter="$PWD/$build/apps/rafter/rafter"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu,memory.free \
  --format=csv,noheader | tee "$out/nvidia-smi.csv"

if has tests; then
"$build/tests/test_workloads" --gtest_filter='GpuKernelsCuda.*:MemoryPlan.*:StepTotals.*' >"$out/test_workloads.log" 2>&1
echo "test_workloads (GPU kernels, memory plan): exit $?"; grep -E "^check rope|PASSED|FAILED" "$out/test_workloads.log"
"$build/tests/test_probes" --gtest_filter='*Cuda*:Gpu*' >"$out/test_probes.log" 2>&1
echo "test_probes (CUDA): exit $?"; grep -E "PASSED|FAILED" "$out/test_probes.log"
stamp "tests"
fi

if has probe; then
timeout 300 "$rafter" probe --device cuda -o "$out/machine.json" >"$out/probe.txt" 2>&1
echo "rafter probe --device cuda: exit $?"
grep -E "^kind|latency +(L1|shared|L2|HBM|launch) |fp8_e4m3|fp8_e5m2|h2d_pinned|wgmma" "$out/probe.txt" | head -24
python3 - "$out/machine.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
bad = [c for c in m["ceilings"] if c["figure"]["source"] == "measured" and c["figure"]["value"] != c["figure"]["stats"]["median"]]
print(f"ceilings whose value is not their median: {len(bad)} of {len(m['ceilings'])}")
for c in m["ceilings"]:
    if c["kind"] == "latency" and c["resource"] in ("L1", "L2"):
        s, p = c["figure"]["stats"], c["params"]
        print(f"  latency {c['resource']:<3} value {c['figure']['value']*1e9:.2f} ns = median {s['median']*1e9:.2f} ns "
              f"(min {s['min']*1e9:.2f}, max {s['max']*1e9:.2f}; {p.get('cycles', 0):.1f} cycles; wall median "
              f"{(p.get('wall_seconds_per_hop') or {}).get('median', 0)*1e9:.2f} ns)")
PY
stamp "probe"
fi

if has plan; then
"$rafter" profile --plan --device cuda --model llama2-7b --phase train --seq 4096 --precision nvfp4 >"$out/plan-train-nvfp4.txt" 2>&1
echo "plan --device cuda: exit $?"; grep -E "adamw|total:|would have no backend" "$out/plan-train-nvfp4.txt"
fi
if has train; then
s=$(date +%s)
timeout 900 "$rafter" profile --device cuda --model llama2-7b --phase train --seq 4096 --precision nvfp4 --quick \
  --replace -o "$out/train-nvfp4.json" >"$out/train-nvfp4.txt" 2>"$out/train-nvfp4.err"
echo "rafter profile --device cuda --model llama2-7b --phase train --seq 4096 --precision nvfp4 --quick: exit $?, $(( $(date +%s) - s )) s"
cat "$out/train-nvfp4.err" | head -5
grep -E "adamw|^total:|not covered|no backend|does not fit|scaled|FAILED|failed" "$out/train-nvfp4.txt"
stamp "train step"
fi
if has default; then

(mkdir -p "$out/default" && cd "$out/default" && timeout 600 "$rafter" >"../default.txt" 2>"../default.err"; echo "rafter (default job): exit $?")
grep -E "^step:|achieved|not covered|record\(s\)|launch floors|time by binding|decode\.layer\.(attn\.rope|attn_norm|mlp\.act|attn\.residual)|prefill\.layer\.attn\.rope" "$out/default.txt" | head -16
grep -c "launch-bound" "$out/default.txt" | sed 's/^/records named launch-bound: /'
cp "$out"/default/run.json "$out/default-run.json" 2>/dev/null
stamp "default job"
fi
if has suite; then
(cd "$build" && timeout "${SUITE_TIMEOUT:-420}" ctest -j "${SUITE_JOBS:-6}" --timeout 300 --output-on-failure) >"$out/ctest.log" 2>&1
echo "ctest on the GPU host: exit $?"
grep -q "No tests were found" "$out/ctest.log" && echo "ctest found no tests: $build was built without them"
grep -E "tests passed|tests failed|\*\*\*(Failed|Timeout)" "$out/ctest.log" | head -20
stamp "suite"
fi
if has models; then
[ -f "$out/machine.json" ] || timeout 120 "$rafter" probe --device cuda --quick -o "$out/machine.json" >"$out/probe-quick.txt" 2>&1
mkdir -p "$out/models"
for m in llama2-7b gla-1.3b llama2-13b llama2-70b; do
  for p in decode prefill train; do
    for r in bf16 fp8 nvfp4; do
      f="$out/models/$m-$p-$r"
      timeout 150 "$rafter" profile --device cuda --model $m --phase $p --precision $r --quick --algo heuristic \
        --replace -o "$f.json" >"$f.txt" 2>&1
      rc=$?
      timeout 30 "$rafter" report -m "$out/machine.json" "$f.json" >"$f.report" 2>&1
      echo "$m $p $r: profile exit $rc, report exit $?; $(grep -E '^step:' "$f.report" | head -1)"
    done
  done
done
python3 - "$out/models" <<'PY'
import collections, glob, json, os, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    recs = json.load(open(f)).get("records", [])
    st = collections.Counter(r.get("status") for r in recs)
    bad = [f"{r.get('label')}: {r.get('status')} {str(r.get('note', ''))[:60]}" for r in recs if r.get("status") != "ok"]
    print(f"{os.path.basename(f)[:-5]:<26} {dict(st)} {bad[:4]}")
PY
stamp "models"
fi
if has rows; then

timeout 400 python3 bench/decode_rows_vs_pytorch.py --rafter "$rafter" --out "$out/decode-rows.json" 2>&1 \
  | tee "$out/decode-rows.log" | tail -9
stamp "decode rows"
fi
