#!/usr/bin/env python3
"""Side-by-side table: rafter's CUDA ceilings (machine.json) against PyTorch's (reference.py --json),
with the issue-3 targets. Use: python3 bench/gpu_probes_table.py machine.json reference.json [wall_s]"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def ceiling(machine, kind, resource, operation=None, isa=None):
    best = None
    for c in machine.get("ceilings", []):
        if c["kind"] != kind or c["resource"] != resource or not c["device"].startswith("cuda"):
            continue
        if operation and c["operation"] != operation:
            continue
        if isa and not c["isa"].startswith(isa):  # "stream" also names the operator-sized streams
            continue
        if c.get("params", {}).get("small_operators_below_bytes"):  # a small operator's roof, not the level's
            continue
        better = best is None or (c["figure"]["value"] < best["figure"]["value"] if kind == "latency"
                                  else c["figure"]["value"] > best["figure"]["value"])
        if better:
            best = c
    return best


def main():
    machine, ref = load(sys.argv[1]), load(sys.argv[2])
    wall = float(sys.argv[3]) if len(sys.argv) > 3 else None
    r = lambda k: ref.get(k, {}).get("value")
    # name, rafter ceiling (kind, resource, op, isa), scale to the reference's unit, reference key, target
    rows = [
        ("HBM copy (TB/s, read+write)", ("bandwidth", "HBM", "copy", "stream"), 1e-12, "copy_4096MiB", 1.0),
        ("HBM read (TB/s)", ("bandwidth", "HBM", "read", "stream"), 1e-12, "read_sum_4096MiB", None),
        ("HBM write (TB/s)", ("bandwidth", "HBM", "write", "stream"), 1e-12, None, None),
        ("L2 copy (TB/s) vs torch 32MiB", ("bandwidth", "L2", "copy", None), 1e-12, "copy_32MiB", None),
        ("L2 read (TB/s)", ("bandwidth", "L2", "read", None), 1e-12, None, None),
        ("L2 read, near partition (TB/s)", ("bandwidth", "L2", "read_near_partition", None), 1e-12, None, None),
        ("L2 read, far partition (TB/s)", ("bandwidth", "L2", "read_far_partition", None), 1e-12, None, None),
        ("L1 read (TB/s)", ("bandwidth", "L1", "read", None), 1e-12, None, None),
        ("shared read (TB/s)", ("bandwidth", "shared", "read", None), 1e-12, None, None),
        ("BF16 tensor (TFLOP/s)", ("compute", "bf16", None, None), 1e-12, "gemm_bf16_8192", 1.05),
        ("FP16 tensor (TFLOP/s)", ("compute", "fp16", None, None), 1e-12, "gemm_fp16_8192", None),
        ("TF32 tensor (TFLOP/s)", ("compute", "tf32", None, None), 1e-12, "gemm_tf32_8192", None),
        ("FP8 E4M3 (TFLOP/s)", ("compute", "fp8_e4m3", None, None), 1e-12, "gemm_fp8_e4m3fn_8192", 1.05),
        ("FP8 E5M2 (TFLOP/s)", ("compute", "fp8_e5m2", None, None), 1e-12, "gemm_fp8_e5m2_8192", None),
        ("INT8 tensor (TOP/s)", ("compute", "int8", None, None), 1e-12, "gemm_int8_8192", None),
        ("FP4 emulated (TFLOP/s)", ("compute", "fp4", None, None), 1e-12, None, None),
        ("FP32 FFMA (TFLOP/s) vs SGEMM", ("compute", "fp32", None, "ffma"), 1e-12, "gemm_fp32_8192", None),
        ("FP64 DFMA (TFLOP/s)", ("compute", "fp64", None, "dfma"), 1e-12, "gemm_fp64_8192", None),
        ("FP64 DMMA (TFLOP/s) vs DGEMM", ("compute", "fp64", None, "dmma"), 1e-12, "gemm_fp64_8192", None),
        ("H2D pinned (GB/s)", ("link", "pcie", "h2d_pinned", None), 1e-9, "h2d_pinned_1GiB", None),
        ("D2H pinned (GB/s)", ("link", "pcie", "d2h_pinned", None), 1e-9, "d2h_pinned_1GiB", None),
        ("both ways pinned (GB/s)", ("link", "pcie", "bidirectional_pinned", None), 1e-9, None, None),
        ("H2D pageable (GB/s)", ("link", "pcie", "h2d_pageable", None), 1e-9, None, None),
        ("D2H pageable (GB/s)", ("link", "pcie", "d2h_pageable", None), 1e-9, None, None),
        ("D2D copy (TB/s, read+write)", ("link", "device", "d2d", None), 1e-12, "copy_4096MiB", None),
    ]
    print(f"{'figure':34s} {'rafter':>9s} {'pytorch':>9s} {'ratio':>6s} {'target':>7s} "
          f"{'datasheet':>9s} {'r/ds':>5s} {'GHz':>5s}  flag")
    for name, (kind, res, op, isa), scale, key, target in rows:
        c = ceiling(machine, kind, res, op, isa)
        v = c["figure"]["value"] * scale if c else None
        p = r(key) if key else None
        ratio = v / p if v and p else None
        ds = c.get("datasheet", {}).get("value") if c else None
        verdict = ""
        if target and ratio:
            verdict = f">={target:.2f} " + ("ok" if ratio >= target else "MISS")
        fmt = lambda x, w, d: f"{x:{w}.{d}f}" if x is not None else " " * (w - 1) + "-"
        print(f"{name:34s} {fmt(v, 9, 2)} {fmt(p, 9, 2)} {fmt(ratio, 6, 2)} {verdict:>7s} "
              f"{fmt(ds * scale if ds else None, 9, 2)} {fmt(c.get('datasheet', {}).get('ratio') if c else None, 5, 2)} "
              f"{fmt(c['frequency_hz'] / 1e9 if c and c.get('frequency_hz') else None, 5, 3)}  "
              f"{(c or {}).get('flag', '')}")
    for res, op, lbl in (("L1", "chase", "L1"), ("L2", "chase", "L2 (random lines)"),
                         ("L2", "hit_near_partition", "L2 near partition"),
                         ("L2", "hit_far_partition", "L2 far partition"), ("HBM", "chase", "HBM")):
        c = ceiling(machine, "latency", res, op)
        if c:
            print(f"latency {lbl:26s} {c['figure']['value'] * 1e9:9.1f} ns  {c['params'].get('cycles', 0):7.0f} cycles")
    for k, v in machine.get("conditions", {}).items():
        if "tlb" in k or "fp4" in k or "l2_partitions" in k:
            print(f"{k}: {v}")
    checks = [c for c in machine.get("ceilings", []) if "check" in c.get("params", {})]
    failed = [f"{c['resource']}/{c['operation']}/{c['isa']}" for c in checks  # probes say "pass", records "passed"
              if not c["params"]["check"].get("pass", c["params"]["check"].get("passed"))]
    print(f"data checks: {len(checks) - len(failed)}/{len(checks)} pass" + (f"; FAILED: {failed}" if failed else ""))
    if wall is not None:
        print(f"rafter probe --device cuda wall time: {wall:.1f} s (target < 60 s)")


if __name__ == "__main__":
    main()
