#!/usr/bin/env python3
"""rafter's GPU quantizers beside PyTorch (issue 13's quantization targets).

Modes (bench/quant_vs_pytorch.sh runs them in one device call):
  rafter --rafter BIN --out rafter.json   `rafter profile --op quantize|dequantize` of every row
  torch  --out torch.json                 the same quantizer written here from its definition (below),
                                          eager and torch.compile, same shapes, same timing method
  table  --rafter-json --torch-json --machine machine.json
QUANT_ROWS=patches runs the hot-channel patch rows only (bench/quant_vs_pytorch.sh then skips torch),
QUANT_ROWS=quantizers the quantizer rows only.
QUANT_FILTER=REGEX keeps the quantizer rows whose name matches (both sides and the table).

Rows: Llama-2 7B shapes, activations 4096 tokens x 4096 / 11008 features (NVFP4 1x16, MXFP4, FP8 with
current scaling), weights 11008x4096 / 4096x11008 (NVFP4 16x16), the weight-gradient operand (NVFP4
1x16 with RHT and stochastic rounding), and the dequantizers. Each rafter row is judged on the HBM
traffic of rafter's model of the operator (the record's HBM bytes: the input read twice when it does
not fit in L2, once when it does) against rafter's own HBM roof for that traffic's read:write mix,
interpolated as the roofline does (bench/mix_roofs_table.py); targets: >= 90 % of that roof, and
faster than torch.compile. The PyTorch side is timed with bench/gpu_operators_vs_pytorch.py's method
(rafter's: cold L2, CUDA graph, external events). Last, the hot-channel patch at about 1 % of K
beside the NVFP4 GEMM it patches: as its own operator (a BF16 GEMM with beta = 1 over all of Y) and
inside the GEMM as `hot` channels of extra K, whose record times the GEMM without its patch too
(details.hot_patch; target: <= 5 % of its time).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_operators_vs_pytorch import rafter_row, row_key, stages_main, torch_timer  # noqa: E402
from mix_roofs_table import at_mix, mixes  # noqa: E402


def q(name, op, precision, rows, cols, **flags):
    shape = {"rows": rows, "cols": cols, **flags}
    return {"name": name, "op": op, "phase": "fwd", "precision": precision, "shape": shape}


ROWS = [
    q("act 4096x4096 nvfp4", "quantize", "nvfp4", 4096, 4096),
    q("act 4096x11008 nvfp4", "quantize", "nvfp4", 4096, 11008),
    q("W 11008x4096 nvfp4 16x16", "quantize", "nvfp4", 11008, 4096, block2d=1),
    q("W 4096x11008 nvfp4 16x16", "quantize", "nvfp4", 4096, 11008, block2d=1),
    q("dY 4096x4096 nvfp4 rht+sr", "quantize", "nvfp4", 4096, 4096, rht=1, sr=1),
    q("dY 4096x11008 nvfp4 sr", "quantize", "nvfp4", 4096, 11008, sr=1),
    q("act 4096x4096 mxfp4", "quantize", "mxfp4", 4096, 4096),
    q("act 4096x4096 fp8_e4m3", "quantize", "fp8_e4m3", 4096, 4096),
    q("dY 4096x4096 fp8_e5m2", "quantize", "fp8_e5m2", 4096, 4096),
    # Row-wise and column-wise copies from one pass (the training recipe's X, dY and W), and the
    # column-wise copy alone (what the recipe emitted before, beside the row-wise row above).
    q("act+T 4096x4096 nvfp4", "quantize", "nvfp4", 4096, 4096, transpose=1),
    q("act+T 4096x4096 nvfp4 rht", "quantize", "nvfp4", 4096, 4096, transpose=1, rht=1),
    q("actT 4096x4096 nvfp4 rht", "quantize", "nvfp4", 4096, 4096, rht=1),
    q("dY+T 4096x4096 nvfp4 rht+sr", "quantize", "nvfp4", 4096, 4096, transpose=1, rht=1, sr=1),
    q("W+T 11008x4096 nvfp4 16x16", "quantize", "nvfp4", 11008, 4096, block2d=1, transpose=1),
    q("act+T 4096x4096 mxfp4", "quantize", "mxfp4", 4096, 4096, transpose=1),
    q("act+T 4096x4096 fp8_e4m3", "quantize", "fp8_e4m3", 4096, 4096, transpose=1),
    q("deq 4096x4096 nvfp4", "dequantize", "nvfp4", 4096, 4096),
    q("deq W 11008x4096 nvfp4 16x16", "dequantize", "nvfp4", 11008, 4096, block2d=1),
    q("deq 4096x4096 mxfp4", "dequantize", "mxfp4", 4096, 4096),
    q("deq 4096x4096 fp8_e4m3", "dequantize", "fp8_e4m3", 4096, 4096),
]


# (patch as its own operator, the NVFP4 GEMM it patches, that GEMM with the patch inside as `hot`
# channels of extra K): Llama-2 7B o_proj (K 4096) and down_proj (K 11008) at 4096 tokens, hot = 1 %
# of K rounded to a multiple of 8.
def patch_rows(proj, k, hot):
    gemm = {"m": 4096, "n": 4096, "k": k, "batch": 1}
    return ({"name": f"patch {proj} hot={hot}", "op": "hot_channel_patch", "phase": "fwd", "precision": "bf16",
             "shape": {"tokens": 4096, "out": 4096, "hot": hot}},
            {"name": f"gemm {proj} nvfp4", "op": "gemm", "phase": "fwd", "precision": "nvfp4", "shape": gemm},
            {"name": f"gemm {proj} nvfp4 hot={hot}", "op": "gemm", "phase": "fwd", "precision": "nvfp4",
             "shape": dict(gemm, hot=hot)})


PATCHES = [patch_rows("o_proj", 4096, 40), patch_rows("down_proj", 11008, 112)]
if os.environ.get("QUANT_FILTER"):
    ROWS = [r for r in ROWS if re.search(os.environ["QUANT_FILTER"], r["name"])]


def run_rafter(args):
    results = {}
    patches = [] if os.environ.get("QUANT_ROWS") == "quantizers" else [r for rows in PATCHES for r in rows]
    for row in patches if os.environ.get("QUANT_ROWS") == "patches" else ROWS + patches:
        rafter_row(args.rafter, row, [], results)
        json.dump(results, open(args.out, "w"), indent=1)


# ---------------------------------------------------------------- the quantizers in PyTorch
def quantizers(torch):
    """quant_math.cpp's definitions (fp32 scale arithmetic, E2M1 round-to-nearest-even by its
    thresholds, RHT signs), written as a PyTorch user would; returns quantize(x, row) -> tensors and
    dequantize(tensors, row) -> BF16."""
    dev = "cuda"
    signs = torch.tensor([1, -1, 1, 1, -1, 1, -1, -1, 1, 1, -1, 1, -1, -1, 1, -1], dtype=torch.float32, device=dev)
    h16 = torch.tensor([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], dtype=torch.float32,
                       device=dev)
    rht_t = ((h16 * signs) / 4).t().contiguous()  # x_block @ rht_t = H·diag(s)·x / 4
    grid = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float32, device=dev)

    def e2m1_rne(a):
        return ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int() + (a > 2.5).int()
                + (a >= 3.5).int() + (a > 5.0).int())

    def e2m1_sr(a):
        k = ((a >= 0.5).int() + (a >= 1).int() + (a >= 1.5).int() + (a >= 2).int() + (a >= 3).int()
             + (a >= 4).int() + (a >= 6).int())
        lo, hi = grid[k], grid[(k + 1).clamp(max=7)]
        p = torch.where(hi > lo, (a - lo) / (hi - lo), torch.zeros_like(a))
        return k + (torch.rand_like(a) < p).int()

    def pack(k, x):
        code = (k | (((x < 0) & (k != 0)).int() << 3)).to(torch.uint8)
        return code[..., 0::2] | (code[..., 1::2] << 4)

    def quantize(x, row):
        s, prec = row["shape"], row["precision"]
        if s.get("transpose"):  # the row-wise copy untransformed, the column-wise one with the RHT
            plain = dict(row, shape={k: v for k, v in s.items() if k not in ("transpose", "rht")})
            cols = dict(row, shape={**{k: v for k, v in s.items() if k != "transpose"},
                                    "rows": s["cols"], "cols": s["rows"]})
            return quantize(x, plain), quantize(x.t().contiguous(), cols)
        r, c = x.shape
        xf = x.float()
        if s.get("rht"):
            xf = (xf.view(r, c // 16, 16) @ rht_t).view(r, c)
        amax = xf.abs().amax()
        if prec.startswith("fp8"):
            fmax, dt = (448.0, torch.float8_e4m3fn) if prec == "fp8_e4m3" else (57344.0, torch.float8_e5m2)
            ts = torch.where(amax > 0, amax / fmax, torch.ones_like(amax))
            return (xf / ts).clamp(-fmax, fmax).to(dt), ts
        if prec == "mxfp4":
            b = xf.view(r, c // 32, 32)
            bamax = b.abs().amax(-1, keepdim=True)
            e = torch.where(bamax > 0, torch.frexp(bamax).exponent - 1, torch.zeros_like(bamax, dtype=torch.int32))
            scale = torch.ldexp(torch.ones_like(bamax), e - 2)
            k = e2m1_sr(b.abs() / scale) if s.get("sr") else e2m1_rne(b.abs() / scale)
            return pack(k.view(r, c), xf), (e - 2 + 127).to(torch.uint8)
        ts = torch.where(amax > 0, amax / 2688.0, torch.ones_like(amax))
        if s.get("block2d"):
            b = xf.view(r // 16, 16, c // 16, 16).permute(0, 2, 1, 3)
            bamax = b.abs().amax(dim=(-1, -2), keepdim=True)
        else:
            b = xf.view(r, c // 16, 16)
            bamax = b.abs().amax(-1, keepdim=True)
        s8 = (bamax / 6.0 / ts).clamp(max=448.0).to(torch.float8_e4m3fn)
        scale = s8.float() * ts
        a = torch.where(scale > 0, b.abs() / scale, torch.zeros_like(b))
        k = e2m1_sr(a) if s.get("sr") else e2m1_rne(a)
        if s.get("block2d"):
            k = k.permute(0, 2, 1, 3)
        return pack(k.reshape(r, c), xf), s8, ts

    lut = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32,
                       device=dev)

    def dequantize(t, row):
        s, prec = row["shape"], row["precision"]
        r, c = s["rows"], s["cols"]
        if prec.startswith("fp8"):
            codes, ts = t
            return (codes.float() * ts).to(torch.bfloat16)
        codes = t[0]
        v = torch.stack((lut[(codes & 0xF).long()], lut[(codes >> 4).long()]), dim=-1).view(r, c)
        if prec == "mxfp4":
            scale = torch.ldexp(torch.ones_like(t[1], dtype=torch.float32), t[1].int() - 127)
            return (v.view(r, c // 32, 32) * scale).view(r, c).to(torch.bfloat16)
        scale = t[1].float() * t[2]
        if s.get("block2d"):
            return (v.view(r // 16, 16, c // 16, 16) * scale.view(r // 16, 1, c // 16, 1)).view(r, c).to(torch.bfloat16)
        return (v.view(r, c // 16, 16) * scale).view(r, c).to(torch.bfloat16)

    return quantize, dequantize


def run_torch(args):
    import torch
    time_op = torch_timer()
    quantize, dequantize = quantizers(torch)
    results = {"_torch": torch.__version__, "_gpu": torch.cuda.get_device_name(0)}
    for row in ROWS:
        s = row["shape"]
        x = (torch.rand(s["rows"], s["cols"], device="cuda") * 6 - 3).to(torch.bfloat16)
        if row["op"] == "quantize":
            fn = lambda x, row=row: quantize(x, row)  # noqa: E731
            arg = x
        else:
            qrow = dict(row, shape={k: v for k, v in s.items() if k != "sr"})
            arg = quantize(x, qrow)
            fn = lambda t, row=row: dequantize(t, row)  # noqa: E731
        entry = {"row": row}
        torch._dynamo.reset()  # each row its own compilation (one lambda, many rows: the recompile limit)
        compiled = torch.compile(fn, dynamic=False)
        for name, f in (("eager", fn), ("compile", compiled)):
            try:
                entry[name] = time_op(lambda f=f: f(arg))
            except Exception as e:  # noqa: BLE001 (a failed column is reported, the others still run)
                entry[name] = {"error": str(e)[-300:]}
            print(f"torch {row['name']:<30} {name:<8} {entry[name].get('median', float('nan')) * 1e6:10.1f} us",
                  flush=True)
        results[row_key(row)] = entry
        json.dump(results, open(args.out, "w"), indent=1)


# ---------------------------------------------------------------- table
def hbm_bytes(rec):
    for b in rec.get("bytes") or []:
        if b.get("level") in ("HBM", "DRAM"):
            return b["bytes"]
    return None


def table(args):
    raf = json.load(open(args.rafter_json)) if os.path.exists(args.rafter_json) else {}
    tor = json.load(open(args.torch_json)) if os.path.exists(args.torch_json) else {}
    machine = json.load(open(args.machine)) if args.machine and os.path.exists(args.machine) else None
    points = mixes(machine, "HBM") if machine else []
    small = mixes(machine, "HBM", small=True) if machine else []
    gpu = tor.get("_gpu") or (raf.get("_device") or {}).get("name")
    print(f"GPU: {gpu}  torch {tor.get('_torch', 'not run')}")
    print("HBM roofs by write fraction (rafter probe cuda.bandwidth): "
          + (", ".join(f"{w:.3f}: {v / 1e12:.3f} TB/s" for w, v in points) or "not measured"))
    # Context, not the judge: what the probe's plainest streams reach at a 4096^2 BF16 tensor's size
    # (one 32 MiB buffer a stream, each launch timed as the rows are), against the roof of their mix.
    if small and points:
        print("  the same streams at operator size (32 MiB a stream, timed as operators): "
              + ", ".join(f"{w:.3f}: {v / 1e12:.3f} TB/s ({v / at_mix(points, w):.0%} of the roof)"
                          for w, (v, _) in small))
    print(f"\n{'row':<30}{'rafter us':>10}{'HBM MB':>8}{'write':>7}{'TB/s':>7}{'roof':>7}{'%roof':>7}"
          f"{'eager us':>10}{'compile us':>11}{'vs comp':>8}  check")
    fails = []
    us = lambda t: f"{t * 1e6:.1f}" if t else "-"  # noqa: E731
    for row in ROWS:
        entry = raf.get(row_key(row)) or {}
        rec = entry.get("record") or {}
        t = rec.get("status") == "ok" and (rec.get("time") or {}).get("value")
        hb = hbm_bytes(rec)
        written = (rec.get("write_fraction") or 0) * (rec.get("compulsory_bytes") or 0)
        w = written / hb if hb else None
        roof = at_mix(points, w) if points and w is not None else None
        pct = hb / t / roof * 100 if t and hb and roof else float("nan")
        te = (tor.get(row_key(row)) or {}).get("eager", {}).get("median")
        tc = (tor.get(row_key(row)) or {}).get("compile", {}).get("median")
        chk = rec.get("check") or {}
        ok = bool(t) and pct >= 90 and (not tc or t < tc) and chk.get("passed")
        if not ok:
            fails.append(row["name"])
        print(f"{row['name']:<30}{us(t):>10}{(hb or 0) / 1e6:8.1f}{(w if w is not None else float('nan')):7.3f}"
              f"{(hb / t / 1e12 if t and hb else float('nan')):7.2f}{(roof or float('nan')) / 1e12:7.2f}{pct:6.1f}%"
              f"{us(te):>10}{us(tc):>11}{(tc / t if t and tc else float('nan')):7.2f}x"
              f"  {'pass' if chk.get('passed') else 'FAIL'} {chk.get('error', float('nan')):.1e}"
              + ("" if rec else f"  ({entry.get('stderr', 'no record')[-80:]})"))
    print(f"\nrows missing a target (>= 90 % of the mix's HBM roof, faster than torch.compile, check): "
          f"{', '.join(fails) if fails else 'none'}")
    print(f"\n{'hot-channel patch':<26}{'patch us':>10}{'gemm us':>10}{'share':>8}"
          f"{'fused us':>10}{'without':>9}{'share':>8}{'vs row':>8}  target <= 5 % (fused)")
    for patch, gemm, fused in PATCHES:
        recs = [((raf.get(row_key(r)) or {}).get("record") or {}) for r in (patch, gemm, fused)]
        tp, tg, tf = ((r.get("time") or {}).get("value") for r in recs)
        hp = (recs[2].get("details") or {}).get("hot_patch") or {}
        pct = lambda a, b: f"{(a - b) / b * 100:.1f}%" if a and b else "-"  # noqa: E731
        share = hp.get("patch_share")
        ok = share is not None and share <= 0.05 and (recs[2].get("check") or {}).get("passed")
        print(f"{patch['name']:<26}{us(tp):>10}{us(tg):>10}{(f'{tp / tg * 100:.1f}%' if tp and tg else '-'):>8}"
              f"{us(tf):>10}{us(hp.get('gemm_without_patch_seconds')):>9}"
              f"{(f'{share * 100:.1f}%' if share is not None else '-'):>8}{pct(tf, tg):>8}"
              f"  {'ok' if ok else 'NO'} {gemm['name']}")


def main():
    stages_main(__doc__.splitlines()[0], run_rafter, run_torch, table)


if __name__ == "__main__":
    main()
