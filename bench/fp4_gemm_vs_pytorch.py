#!/usr/bin/env python3
"""rafter's emulated NVFP4 GEMMs on sm_90 beside BF16 and PyTorch (issue 13's GEMM targets).

Modes (bench/fp4_gemm_vs_pytorch.sh runs them in one device call):
  rafter --rafter BIN --out rafter.json   `rafter profile` of every row in nvfp4 and in bf16
  torch  --out torch.json                 "dequantize with PyTorch, then torch.matmul in BF16", eager
                                          and torch.compile, on the same FP4 bytes; for decode rows also
                                          a plain read of that many bytes (torch.amax over int32), the
                                          size's read peer
  table  --rafter-json --torch-json [--machine machine.json]

Rows: Llama-2 linears, forward (Y = X·Wᵀ), at 4096 tokens (prefill: target rafter NVFP4 ≤ 1.25× rafter
BF16, i.e. cuBLASLt's BF16 GEMM of the same shape) and 16 tokens (decode: target ≥ 70 % of the HBM read
ceiling on the FP4 bytes, weights with their E4M3 scales plus activations). The PyTorch side is timed
with bench/gpu_operators_vs_pytorch.py's method (rafter's: cold L2, CUDA graph, external events).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_operators_vs_pytorch import LINEARS, rafter_row, row_key, stages_main, torch_timer  # noqa: E402

LAYERS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
TOKENS = tuple(int(t) for t in os.environ.get("FP4_TOKENS", "4096 16").split())  # FP4_TOKENS=16: decode rows only


def rows(models):
    out = []
    for model, layer, n, k in LINEARS:
        if model not in models or layer not in LAYERS:
            continue
        for m in TOKENS:
            for prec in ("nvfp4", "bf16"):
                out.append({"name": f"{model} {layer} M={m}", "op": "gemm", "phase": "fwd", "precision": prec,
                            "shape": {"m": m, "n": n, "k": k, "batch": 1}})
    return out


def fp4_bytes(m, n, k):
    """Bytes an NVFP4 GEMM must read: E2M1 codes (0.5 B) and E4M3 scales (1/16 B) of both operands."""
    return (m + n) * k * (0.5 + 1 / 16)


def run_rafter(args):
    results = {}
    for row in rows(args.models.split()):
        rafter_row(args.rafter, row, [], results)
        json.dump(results, open(args.out, "w"), indent=1)


def run_torch(args):
    import torch
    time_op = torch_timer()
    lut = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.bfloat16,
                       device="cuda")

    def dequantize(codes, scales):  # codes [rows, k/2] uint8, scales [rows, k/16] float8_e4m3fn
        rows, half = codes.shape
        v = torch.stack((lut[(codes & 0xF).long()], lut[(codes >> 4).long()]), dim=-1).view(rows, half * 2 // 16, 16)
        return (v * scales.to(torch.bfloat16).unsqueeze(-1)).view(rows, half * 2)

    def gemm(xc, xs, wc, ws, alpha):
        return torch.matmul(dequantize(xc, xs), dequantize(wc, ws).t()) * alpha

    compiled = torch.compile(gemm, dynamic=True)
    results = {"_torch": torch.__version__, "_gpu": torch.cuda.get_device_name(0)}
    for row in rows(args.models.split()):
        if row["precision"] != "nvfp4":
            continue
        s = row["shape"]
        m, n, k = s["m"], s["n"], s["k"]
        gen = lambda r, c: torch.randint(0, 256, (r, c), dtype=torch.uint8, device="cuda")  # noqa: E731
        scales = lambda r: (torch.rand(r, k // 16, device="cuda") * 3 + 0.5).to(torch.float8_e4m3fn)  # noqa: E731
        xc, wc, xs, ws = gen(m, k // 2), gen(n, k // 2), scales(m), scales(n)
        alpha = torch.tensor(1.0, dtype=torch.bfloat16, device="cuda")
        entry = {"row": row}
        if m <= 64:  # the size's read peer: a plain PyTorch read (an int32 max) of the same bytes
            buf = torch.randint(-2**31, 2**31 - 1, (int(fp4_bytes(m, n, k)) // 4,), dtype=torch.int32, device="cuda")
            try:
                entry["read"] = time_op(lambda: torch.amax(buf))
            except Exception as e:  # noqa: BLE001
                entry["read"] = {"error": str(e)[-300:]}
            print(f"torch {row['name']:<28} {'read':<8} {entry['read'].get('median', float('nan')) * 1e6:10.1f} us",
                  flush=True)
            del buf
        for name, fn in (("eager", gemm), ("compile", compiled)):
            try:
                entry[name] = time_op(lambda fn=fn: fn(xc, xs, wc, ws, alpha))
            except Exception as e:  # noqa: BLE001 (a failed column is reported, the others still run)
                entry[name] = {"error": str(e)[-300:]}
            print(f"torch {row['name']:<28} {name:<8} {entry[name].get('median', float('nan')) * 1e6:10.1f} us",
                  flush=True)
        results[row_key(row)] = entry
        json.dump(results, open(args.out, "w"), indent=1)


def hbm_read_ceiling(path):
    if not path or not os.path.exists(path):
        return None
    best = None
    for c in json.load(open(path)).get("ceilings", []):
        if (c.get("kind") == "bandwidth" and c.get("resource") == "HBM" and c.get("operation") == "read"
                and c.get("flag") != "above_datasheet"):
            best = max(best or 0, c["figure"]["value"])
    return best


def seconds(rec):
    return rec and rec.get("status") == "ok" and (rec.get("time") or {}).get("value")


def table(args):
    raf = json.load(open(args.rafter_json)) if os.path.exists(args.rafter_json) else {}
    tor = json.load(open(args.torch_json)) if os.path.exists(args.torch_json) else {}
    roof = hbm_read_ceiling(args.machine)
    print(f"GPU: {tor.get('_gpu')}  torch {tor.get('_torch')}; HBM read ceiling (rafter probe cuda.bandwidth): "
          f"{roof / 1e12:.3f} TB/s" if roof else "HBM read ceiling: not measured")
    print(f"\n{'row':<28}{'NVFP4 us':>10}{'BF16 us':>10}{'ratio':>7}{'target':>9}{'%HBM rd':>8}{'read us':>9}"
          f"{'%HBM rd':>8}{'torch eager':>12}{'compile':>9}  ok  path")
    fails = []
    for row in rows(args.models.split()):
        if row["precision"] != "nvfp4":
            continue
        bf = dict(row, precision="bf16")
        rec = (raf.get(row_key(row)) or {}).get("record")
        t4, t16 = seconds(rec), seconds((raf.get(row_key(bf)) or {}).get("record"))
        tr = (tor.get(row_key(row)) or {}).get("read", {}).get("median")
        te = (tor.get(row_key(row)) or {}).get("eager", {}).get("median")
        tc = (tor.get(row_key(row)) or {}).get("compile", {}).get("median")
        s = row["shape"]
        ratio = t4 / t16 if t4 and t16 else float("nan")
        decode = s["m"] <= 64
        pct = fp4_bytes(s["m"], s["n"], s["k"]) / t4 / roof * 100 if t4 and roof and decode else float("nan")
        target = "≥70%HBM" if decode else "≤1.25×"
        ok = t4 and (pct >= 70 if decode else ratio <= 1.25) and all(t4 < t for t in (te, tc) if t)
        if not ok:
            fails.append(row["name"])
        path = ((rec or {}).get("details") or {}).get("path", (rec or {}).get("note", "no record"))[:40]
        share = f"{pct:.1f}%" if pct == pct else "-"
        read_share = f"{fp4_bytes(s['m'], s['n'], s['k']) / tr / roof * 100:.1f}%" if tr and roof else "-"
        us = lambda t: f"{t * 1e6:.1f}" if t else "-"  # noqa: E731
        print(f"{row['name']:<28}{us(t4):>10}{us(t16):>10}{ratio:>7.2f}{target:>9}{share:>8}{us(tr):>9}{read_share:>8}"
              f"{us(te):>12}{us(tc):>9}  {'yes' if ok else 'NO':<3} {path}")
    print(f"\nrows missing a target: {', '.join(fails) if fails else 'none'}")
    print("read us: PyTorch reading the decode row's FP4 bytes (torch.amax over them as int32, cold L2, the same "
          "timing): what a plain read of that size reaches, not a target")


def main():
    stages_main(__doc__.splitlines()[0], run_rafter, run_torch, table, models="7b 70b")


if __name__ == "__main__":
    main()
