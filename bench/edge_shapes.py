#!/usr/bin/env python3
"""Every operator at the edges of its shapes, on one device: `rafter profile --op` per case.

    python3 bench/edge_shapes.py --rafter BUILD/apps/rafter/rafter --device cuda:0 --out DIR [--only REGEX]
        [--memcheck]

A case ends in one of:
  ok       exit 0, the record ran and its check passed;
  refused  exit 2 with one line `rafter: error: ...` on stderr, or a record that names why it did not
           run (no backend, does not fit, or a backend's stated limit), never a CUDA error;
  BUG      anything else: another exit code, a signal, a timeout, a failed check, a record failed by a
           CUDA error (a launch that does not fit an SM, an illegal address), stderr past one line on
           a refusal, or exit 0 with a record that is not ok.
Shapes are small (each case well under a second of GPU time) except where the edge is the size itself
(the longest rows a kernel takes). The table goes to stdout and DIR/edge_shapes.json; the exit status
is 1 when any case is a BUG.
"""
import argparse
import json
import os
import re
import subprocess
import sys

# (op, phase, precision or "", shape). Values picked at the edges: one element, odd lengths (scalar
# tails), one past a vector or tile, the longest rows a row kernel holds and one past them, GQA groups,
# head dims other than 128, lengths that are not multiples of a chunk or a scale block.
# (Not 1: there the RMSNorm backward's dx = r·dy·w·ε/(x² + ε) is the difference of two equal terms,
# which no FP32 kernel checks to 1 %; 2 is the shortest row.)
ROWS = [2, 7, 8, 1000, 1025, 8192, 8200, 16384, 32768, 32769]


def cases():
    c = []
    for h in ROWS:
        for ph in ("fwd", "bwd"):
            c.append(("rmsnorm", ph, "bf16", {"tokens": 3, "hidden": h}))
    for h in (1, 7, 8, 4097):
        for ph in ("fwd", "bwd"):
            c.append(("residual_add", ph, "bf16", {"tokens": 3, "hidden": h}))
    for f in (1, 7, 11008, 11009):
        for ph in ("fwd", "bwd"):
            c.append(("swiglu", ph, "bf16", {"tokens": 3, "ffn": f}))
    for cols in (1, 7, 4097, 32768, 32769):
        c.append(("softmax", "fwd", "bf16", {"rows": 3, "cols": cols}))
    for s, kv in ((1, 1), (7, 7), (5, 40), (40, 5), (129, 129)):
        c.append(("attention_softmax", "fwd", "bf16",
                  {"batch": 1, "seq": s, "kv_seq": kv, "heads": 2, "head_dim": 64, "causal": 1}))
    for hd in (2, 64, 96, 256, 7):
        for ph in ("fwd", "bwd"):
            c.append(("rope", ph, "bf16", {"tokens": 5, "heads": 3, "head_dim": hd, "seq": 3}))
    for h, v in ((1, 1), (7, 3), (8192, 5), (16384, 2)):
        for ph in ("fwd", "bwd"):
            c.append(("embedding", ph, "bf16", {"tokens": 9, "hidden": h, "vocab": v}))
    for v in (1, 7, 32001, 128256, 262144):
        for ph in ("fwd", "bwd"):
            c.append(("cross_entropy", ph, "bf16", {"tokens": 3, "vocab": v}))
    for p in (1, 7, 4097):
        c.append(("adamw", "step", "bf16", {"params": p}))
    for prec in ("bf16", "fp16", "fp32", "tf32", "fp8_e4m3", "int8"):
        for m, n, k in ((1, 1, 1), (7, 9, 13), (16, 4096, 4096), (17, 33, 64), (1, 5, 4096)):
            for ph in ("fwd", "bwd_input", "bwd_weight"):
                c.append(("gemm", ph, prec, {"m": m, "n": n, "k": k}))
    for prec in ("nvfp4", "mxfp4"):
        for m, n, k in ((1, 16, 64), (7, 9, 64), (16, 4096, 4096), (17, 40, 96), (3, 5, 7)):
            c.append(("gemm", "fwd", prec, {"m": m, "n": n, "k": k}))
        c.append(("gemm", "fwd", prec, {"m": 16, "n": 4096, "k": 4096, "hot": 1}))
        c.append(("gemm", "fwd", prec, {"m": 40, "n": 256, "k": 512, "hot": 5}))
    c.append(("gemm", "fwd", "bf16", {"m": 3, "n": 5, "k": 7, "batch": 3}))
    for s, h, hk, d, causal in ((1, 2, 2, 128, 1), (7, 4, 2, 64, 1), (129, 8, 1, 128, 0), (33, 2, 2, 256, 1),
                                (17, 2, 2, 96, 0), (16, 6, 4, 64, 1)):
        shape = {"batch": 1, "seq": s, "heads": h, "kv_heads": hk, "head_dim": d, "causal": causal}
        c.append(("attention_prefill", "fwd", "bf16", shape))
        c.append(("attention_backward", "bwd", "bf16", shape))
        c.append(("attention_prefill", "fwd", "fp8_e4m3", shape))
    for b, kv, h, hk, d in ((1, 1, 2, 2, 128), (3, 7, 4, 2, 64), (2, 513, 8, 1, 128), (1, 32769, 2, 2, 128),
                            (1, 40, 2, 2, 96)):
        c.append(("attention_decode", "fwd", "bf16", {"batch": b, "kv_len": kv, "heads": h, "kv_heads": hk, "head_dim": d}))
    for s, dk, dv, ch in ((1, 16, 16, 64), (65, 64, 128, 64), (100, 256, 512, 64), (64, 32, 32, 16), (50, 16, 16, 7)):
        for ph in ("fwd", "bwd"):
            c.append(("gla_chunked", ph, "bf16", {"batch": 1, "seq": s, "heads": 2, "head_dim_k": dk, "head_dim_v": dv, "chunk": ch}))
    for dk, dv in ((16, 16), (256, 512), (7, 9)):
        c.append(("gla_decode", "fwd", "bf16", {"batch": 2, "heads": 2, "head_dim_k": dk, "head_dim_v": dv}))
    for prec in ("nvfp4", "mxfp4", "fp8_e4m3"):
        for r, col in ((1, 16), (7, 48), (17, 64), (3, 7), (16, 4096)):
            c.append(("quantize", "fwd", prec, {"rows": r, "cols": col}))
            c.append(("dequantize", "fwd", prec, {"rows": r, "cols": col}))
    for r, col in ((17, 48), (32, 64), (5, 40)):
        for extra in ({"block2d": 1}, {"rht": 1}, {"rht": 1, "sr": 1}, {"transpose": 1}, {"transpose": 1, "rht": 1, "sr": 1},
                      {"transpose": 1, "block2d": 1}):
            c.append(("quantize", "fwd", "nvfp4", {"rows": r, "cols": col, **extra}))
    for t, o, hot in ((1, 1, 1), (7, 9, 3), (16, 4096, 41), (5, 5, 0)):
        c.append(("hot_channel_patch", "fwd", "bf16", {"tokens": t, "out": o, "hot": hot}))
    return c


def run_case(rafter, device, op, phase, prec, shape, out, timeout, memcheck=False):
    path = os.path.join(out, "case.json")
    if os.path.exists(path):
        os.remove(path)
    cmd = [rafter, "profile", "--device", device, "--op", op, "--phase", phase, "--quick", "-o", path,
           "--shape", ",".join(f"{k}={v}" for k, v in shape.items())]
    if prec:
        cmd += ["--dtype", prec]
    if memcheck:  # compute-sanitizer's report is a BUG (exit 9), whatever rafter said
        cmd = ["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "9", "--print-limit", "3"] + cmd
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "BUG", f"timeout after {timeout} s", None
    err = [line for line in p.stderr.splitlines() if line.strip() and not line.startswith("rafter: note:")]
    rec = None
    if os.path.exists(path):
        try:
            rec = json.load(open(path))["records"][0]
        except (ValueError, KeyError, IndexError):
            return "BUG", "run.json unreadable", None
    rc = p.returncode
    if memcheck and rc == 9:
        errors = [line for line in p.stdout.splitlines() if line.startswith("=========")]
        return "BUG", "memcheck: " + " | ".join(errors[:3])[:200], rec
    if memcheck and rc == 255:  # compute-sanitizer's own code for an application that exited non-zero
        rc = 2 if rec is None else 1
    if rc == 2:
        one = len(err) == 1 and err[0].startswith("rafter: error: ")
        return ("refused" if one else "BUG"), (err[0] if one else f"exit 2, stderr: {' | '.join(err)[:200]}"), rec
    if rc not in (0, 1):
        return "BUG", f"exit {rc}: {' | '.join(err)[-200:]}", rec
    if rec is None:
        return "BUG", f"exit {rc}, no record: {' | '.join(err)[-200:]}", rec
    status, note = rec.get("status"), rec.get("note", "")
    check = rec.get("check") or {}
    if status == "ok":
        if check.get("ran") and not check.get("passed"):
            return "BUG", f"check failed: error {check.get('error')}", rec
        return ("ok" if rc == 0 else "BUG"), ("exit 1 with an ok record" if rc else ""), rec
    if status == "invalid":
        return "BUG", f"check failed: error {check.get('error')} (tolerance {check.get('tolerance')})", rec
    if status in ("no_backend", "does_not_fit") or (status == "failed" and "CUDA error" not in note):
        return "refused", f"{status}: {note}", rec
    return "BUG", f"{status}: {note}", rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rafter", required=True)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="regex over 'op phase precision shape'")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--memcheck", action="store_true", help="each case under compute-sanitizer memcheck")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows, counts = [], {"ok": 0, "refused": 0, "BUG": 0}
    for op, phase, prec, shape in cases():
        name = f"{op} {phase} {prec} " + ",".join(f"{k}={v}" for k, v in shape.items())
        if a.only and not re.search(a.only, name):
            continue
        verdict, why, rec = run_case(a.rafter, a.device, op, phase, prec, shape, a.out, a.timeout, a.memcheck)
        counts[verdict] += 1
        t = rec.get("time", {}).get("value") if rec and rec.get("time") else None
        print(f"{verdict:8s} {name:90s} {'' if t is None else f'{t * 1e6:9.1f} us'}  {why}"[:300], flush=True)
        rows.append({"case": name, "verdict": verdict, "why": why, "backend": rec.get("backend") if rec else None,
                     "seconds": t, "check": rec.get("check") if rec else None})
    with open(os.path.join(a.out, "edge_shapes.json.tmp"), "w") as f:
        json.dump({"device": a.device, "counts": counts, "cases": rows}, f, indent=1)
    os.replace(os.path.join(a.out, "edge_shapes.json.tmp"), os.path.join(a.out, "edge_shapes.json"))
    print(f"\n{counts['ok']} ok, {counts['refused']} refused, {counts['BUG']} BUG")
    for r in rows:
        if r["verdict"] == "BUG":
            print(f"BUG: {r['case']}: {r['why']}")
    return 1 if counts["BUG"] else 0


if __name__ == "__main__":
    sys.exit(main())
