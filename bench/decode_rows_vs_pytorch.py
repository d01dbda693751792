#!/usr/bin/env python3
"""Small-token rows (Llama-2 7B decode at batch 8, and RoPE at prefill sizes) of rafter's GPU
kernels beside PyTorch eager and torch.compile, timed the same way (gpu_operators_vs_pytorch.py's
cold-L2 graph method), in one device call. Written for the first-contact issue's slow decode RoPE:
rafter gave one thread per (token, vector) and walked the heads serially, 64 threads at batch 8.

  python3 bench/decode_rows_vs_pytorch.py --rafter build-dev/apps/rafter/rafter --out rows.json
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_operators_vs_pytorch as g  # noqa: E402

ROWS = [
    ("rope q decode b8", "rope", "fwd", {"tokens": 8, "heads": 32, "head_dim": 128, "seq": 4096}),
    ("rope q decode b64", "rope", "fwd", {"tokens": 64, "heads": 32, "head_dim": 128, "seq": 4096}),
    ("rope q prefill 4096", "rope", "fwd", {"tokens": 4096, "heads": 32, "head_dim": 128, "seq": 4096}),
    ("rope q prefill 16384", "rope", "fwd", {"tokens": 16384, "heads": 32, "head_dim": 128, "seq": 4096}),
    ("rmsnorm fwd decode b8", "rmsnorm", "fwd", {"tokens": 8, "hidden": 4096}),
    ("swiglu fwd decode b8", "swiglu", "fwd", {"tokens": 8, "ffn": 11008}),
    ("residual add decode b8", "residual_add", "fwd", {"tokens": 8, "hidden": 4096}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rafter", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F
    results = {}
    for name, op, phase, shape in ROWS:
        row = {"name": name, "op": op, "phase": phase, "precision": "bf16", "shape": shape}
        g.rafter_row(a.rafter, row, [], results)
    time_op = g.torch_timer()
    fns = g.torch_memory_fns(torch, F)
    print(f"\n{'row':<24}{'rafter us':>11}{'eager us':>10}{'compile us':>11}{'vs compile':>11}  status")
    for name, op, phase, shape in ROWS:
        row = {"op": op, "phase": phase, "precision": "bf16", "shape": shape}
        key, inputs = g.memory_inputs(torch, name, shape)
        eager = fns[key]
        te = time_op(lambda: eager(*inputs))["median"]
        comp = torch.compile(eager)
        comp(*inputs)
        tc = time_op(lambda: comp(*inputs))["median"]
        rec = results[g.row_key(row)]["record"] or {}
        tr = (rec.get("time") or {}).get("value") or float("nan")
        results[g.row_key(row)].update({"eager_seconds": te, "compiled_seconds": tc})
        print(f"{name:<24}{tr * 1e6:11.2f}{te * 1e6:10.2f}{tc * 1e6:11.2f}{tc / tr:10.2f}x  {rec.get('status')}",
              flush=True)
    json.dump(results, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
