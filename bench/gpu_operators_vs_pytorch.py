#!/usr/bin/env python3
"""rafter's GPU operators beside PyTorch on the same GPU (issue 8's targets).

Modes (bench/gpu_operators_vs_pytorch.sh runs them in order, in one device call):
  pairs   --rafter BIN --out rafter.json --torch-out torch.json
                                           GEMM rows: rafter and PyTorch back to back, row by row
  rafter  --rafter BIN --out rafter.json   run `rafter profile --op ...` for every row
  torch   --out torch.json                 PyTorch eager / torch.compile for the same rows (with a
                                           fresh Inductor cache unless TORCHINDUCTOR_CACHE_DIR is set,
                                           each row's kept autotuner configuration in inductor_configs)
  ncu     --rafter BIN --out ncu.json      Nsight Compute gpu__time_duration for a few rows
  table   rafter.json torch.json [...]     the side-by-side tables and the verdicts

Timing on the PyTorch side copies rafter's method exactly (timing_plan.hpp): a CUDA graph of
N x (L2 read-flush, event, operator, event) with external events, each launch's event pair one
sample; the median over samples. The flush reads a buffer twice the L2 size, so the operator starts
cold, and the write-back of its dirty lines falls in the next flush, outside its events.
"""
import argparse
import csv
import functools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

# Llama-2 linear layers: (model, layer, out_features N, in_features K). Fused projections as
# inference engines run them (q|k|v, gate|up); sources: the models' Hugging Face config.json.
LINEARS = [
    ("7b", "qkv_proj", 12288, 4096), ("7b", "o_proj", 4096, 4096), ("7b", "gate_up_proj", 22016, 4096),
    ("7b", "down_proj", 4096, 11008), ("7b", "lm_head", 32000, 4096),
    ("70b", "qkv_proj", 10240, 8192), ("70b", "o_proj", 8192, 8192), ("70b", "gate_up_proj", 57344, 8192),
    ("70b", "down_proj", 8192, 28672), ("70b", "lm_head", 32000, 8192),
]
TOKENS = [4096, 16]
GEMM_PRECISIONS = ["bf16", "fp8_e4m3"]

T = 16384  # memory-bound rows: Llama-2 7B at 16384 tokens (4 sequences of 4096 for attention)
MEM_ROWS = [
    # name, op, phase, shape
    ("rmsnorm fwd", "rmsnorm", "fwd", {"tokens": T, "hidden": 4096}),
    ("rmsnorm bwd", "rmsnorm", "bwd", {"tokens": T, "hidden": 4096}),
    # GLA-1.3B's norm over a head's 512 channels (4 heads a token of 4096 tokens): a warp a row
    ("rmsnorm fwd (512)", "rmsnorm", "fwd", {"tokens": T, "hidden": 512}),
    ("rmsnorm bwd (512)", "rmsnorm", "bwd", {"tokens": T, "hidden": 512}),
    # Llama-2 70B's hidden size: a block of 1024 threads a row in the backward
    ("rmsnorm fwd (8192)", "rmsnorm", "fwd", {"tokens": T, "hidden": 8192}),
    ("rmsnorm bwd (8192)", "rmsnorm", "bwd", {"tokens": T, "hidden": 8192}),
    ("swiglu fwd", "swiglu", "fwd", {"tokens": T, "ffn": 11008}),
    ("swiglu bwd", "swiglu", "bwd", {"tokens": T, "ffn": 11008}),
    ("attn softmax (scale+causal)", "attention_softmax", "fwd",
     {"batch": 4, "seq": 4096, "kv_seq": 4096, "heads": 32, "head_dim": 128, "causal": 1}),
    ("rope q", "rope", "fwd", {"tokens": T, "heads": 32, "head_dim": 128, "seq": 4096}),
    ("residual add", "residual_add", "fwd", {"tokens": T, "hidden": 4096}),
    ("embedding fwd", "embedding", "fwd", {"tokens": T, "hidden": 4096, "vocab": 32000}),
    ("embedding bwd", "embedding", "bwd", {"tokens": T, "hidden": 4096, "vocab": 32000}),
    ("cross-entropy fwd", "cross_entropy", "fwd", {"tokens": T, "vocab": 32000}),
    ("cross-entropy bwd", "cross_entropy", "bwd", {"tokens": T, "vocab": 32000}),
    ("adamw step", "adamw", "step", {"params": 1 << 28}),
]
INT8_ROW = ("int8 8192^3", 8192, 8192, 8192)


def gemm_rows():
    rows = []
    for prec in GEMM_PRECISIONS:
        for model, layer, n, k in LINEARS:
            for m in TOKENS:
                rows.append({"name": f"{model} {layer} M={m}", "op": "gemm", "phase": "fwd", "precision": prec,
                             "shape": {"m": m, "n": n, "k": k, "batch": 1}})
    return rows


def all_rows():
    rows = gemm_rows()
    name, m, n, k = INT8_ROW
    rows.append({"name": name, "op": "gemm", "phase": "fwd", "precision": "int8",
                 "shape": {"m": m, "n": n, "k": k, "batch": 1}})
    for name, op, phase, shape in MEM_ROWS:
        rows.append({"name": name, "op": op, "phase": phase, "precision": "bf16", "shape": shape})
    return rows


def wanted(args, name):
    """--only REGEX: the rows whose name it matches (all rows without it)."""
    return not getattr(args, "only", None) or re.search(args.only, name) is not None


def row_key(r):
    return f"{r['op']}|{r['phase']}|{r['precision']}|" + ",".join(f"{k}={v}" for k, v in sorted(r["shape"].items()))


# ---------------------------------------------------------------- rafter side
def rafter_cmd(binary, row, out_path, extra=()):
    cmd = [binary, "profile", "--device", "cuda:0", "--op", row["op"], "--dtype", row["precision"],
           "--phase", row["phase"], "--shape", ",".join(f"{k}={v}" for k, v in row["shape"].items()),
           "-o", out_path]
    return cmd + list(extra)


def rafter_row(binary, row, extra, results):
    """Runs one row through `rafter profile` and stores its record (or the failure) in results."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.json")
        t0 = time.time()
        p = subprocess.run(rafter_cmd(binary, row, path, extra), capture_output=True, text=True)
        wall = time.time() - t0
        rec = None
        if os.path.exists(path):
            run = json.load(open(path))
            rec = run["records"][0] if run.get("records") else None
            if "device" in run:
                results.setdefault("_device", run["device"])
        results[row_key(row)] = {"row": row, "record": rec, "rc": p.returncode, "wall_s": wall,
                                 "stderr": p.stderr[-600:],
                                 "cmd": " ".join(rafter_cmd(binary, row, "run.json", extra))}
        t = rec and rec.get("time") and rec["time"].get("value")
        print(f"rafter {row.get('name', row['op']):<28} {row['precision']:<9} rc={p.returncode} "
              f"{(t or float('nan')) * 1e6:10.1f} us  {rec and rec.get('status')}  ({wall:.1f} s)", flush=True)
        if p.returncode != 0 and not rec:
            print(p.stderr[-400:], flush=True)


def load_json(path):
    return json.load(open(path)) if path and os.path.exists(path) else {}


def run_rafter(args):
    results = load_json(args.out) if args.append else {}
    rows = [r for r in all_rows() if not (args.skip_gemm and r["op"] == "gemm") and wanted(args, r["name"])]
    for row in rows:
        rafter_row(args.rafter, row, args.extra, results)
        json.dump(results, open(args.out, "w"), indent=1)  # after every row: a timeout keeps the rest


# ---------------------------------------------------------------- PyTorch side
def stages_main(description, run_rafter, run_torch, table, models=None):
    """The command line of a bench script in three stages, each its own process on the device:
    `rafter --rafter BIN --out F`, `torch --out F`, `table --rafter-json F --torch-json F [--machine M]`;
    models: the default of a --models option on each stage (none when None)."""
    ap = argparse.ArgumentParser(description=description)
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("rafter")
    r.add_argument("--rafter", required=True)
    r.add_argument("--out", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--out", required=True)
    tb = sub.add_parser("table")
    tb.add_argument("--rafter-json", required=True)
    tb.add_argument("--torch-json", required=True)
    tb.add_argument("--machine")
    if models is not None:
        for p in (r, t, tb):
            p.add_argument("--models", default=models)
    args = ap.parse_args()
    {"rafter": run_rafter, "torch": run_torch, "table": table}[args.mode](args)


def eager_times(torch, fn, reps=30):
    """Sorted seconds of fn between events, each launch after an L2 read-flush, without a CUDA graph
    (for what a graph cannot hold: autograd's backward on the forward's stream, a Triton kernel whose
    capture fails). A GPU spin of about 0.5 ms before the first event lets the CPU queue all of fn's
    launches first, so that the events time the GPU's work and not the host's launch overhead."""
    flush_buf = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device="cuda").fill_(1.0)
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        torch.sum(flush_buf)
        torch.cuda._sleep(1_000_000)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e-3)
    return sorted(out)


def torch_timer():
    import torch
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda").fill_(1.0)

    def flush():
        torch.sum(flush_buf)

    def time_op(fn, reps=None, preheat=None, pause_s=0.0):  # noqa: ARG001 (reps: older callers)
        """Seconds per launch, cold L2 (rafter's method): a graph of N x (read-flush, event, op,
        event) with external events, each launch's event pair one sample; rafter's default
        RepeatPolicy for warm-up and sample count. pause_s: idle seconds just before the timing;
        preheat(seconds per launch) -> seconds: for power-bound GEMMs (>= 50 us, rafter's
        kPowerBoundSeconds), that long of back-to-back launches of fn before the pause, the load
        rafter's candidate search puts on the GPU before its record (same heating, same pause,
        then the timing: the same start state)."""
        fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        est = a.elapsed_time(b) * 1e-3
        preheat_s = preheat(est) if preheat and est >= 50e-6 else 0.0
        if preheat_s > 0:
            t_end = time.time() + preheat_s
            while time.time() < t_end:
                for _ in range(max(1, int(5e-3 / est))):
                    fn()
                torch.cuda.synchronize()
        if pause_s > 0:
            time.sleep(pause_s)
        n = max(1, min(32, math.ceil(2e-3 / (est + 35e-6))))
        try:
            starts = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n)]
            stops = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n)]
        except TypeError:  # a torch without external events: time whole graphs, subtract the flushes
            return time_op_differential(fn, n, reps or 15)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(n):
                flush()
                starts[i].record()
                fn()
                stops[i].record()
        for _ in range(2):  # rafter's RepeatPolicy{}: 2 warm-up replays ...
            g.replay()
        torch.cuda.synchronize()
        per, replays, total = [], 0, 0.0
        # ... then replays until 5 and 0.05 s of samples, at most 50 replays or 2 s (keep_sampling in
        # op_timer.cu): the same number of samples, so both columns see the same power history.
        while replays < 5 or (replays < 50 and total < 2.0 and total < 0.05):
            g.replay()
            torch.cuda.synchronize()
            new = [starts[i].elapsed_time(stops[i]) * 1e-3 for i in range(n)]
            per.extend(new)
            total += sum(new)
            replays += 1
        per.sort()
        return {"median": per[len(per) // 2], "min": per[0], "max": per[-1], "launches_per_sample": n,
                "samples": len(per), "preheat_s": preheat_s, "pause_s": pause_s}

    def graph_replays(fns, n, reps):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                for f in fns:
                    f()
        g.replay()
        out = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) * 1e-3)
        return sorted(out)

    def time_op_differential(fn, n, reps):
        base = graph_replays([flush], n, reps)
        per = [(t - base[len(base) // 2]) / n for t in graph_replays([flush, fn], n, reps)]
        return {"median": per[len(per) // 2], "min": per[0], "max": per[-1], "launches_per_sample": n,
                "method": "differential (no external events in this torch)"}

    return time_op


def torch_gemm_row(time_op, torch, row, preheat=None, pause_s=0.0):
    time_op = functools.partial(time_op, preheat=preheat, pause_s=pause_s)
    s = row["shape"]
    m, n, k = s["m"], s["n"], s["k"]
    if row["precision"] == "int8":
        a = torch.randint(-128, 127, (m, k), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 127, (k, n), device="cuda", dtype=torch.int8)
        bt = torch.randint(-128, 127, (n, k), device="cuda", dtype=torch.int8)
        return {"eager": time_op(lambda: torch._int_mm(a, b), reps=5),
                "eager_tn": time_op(lambda: torch._int_mm(a, bt.t()), reps=5),
                "how": "torch._int_mm(a [m,k], b [k,n] row-major); eager_tn: b given as bt.t()"}
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if row["precision"] == "bf16":
        fn = lambda: torch.matmul(x, w.t())  # noqa: E731
        return {"eager": time_op(fn), "how": "torch.matmul(x, w.t())", "kernels": torch_kernel_names(torch, fn)}
    xf, wf = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    sa = torch.tensor(1.0, device="cuda")
    sb = torch.tensor(1.0, device="cuda")
    fn = lambda: torch._scaled_mm(xf, wf.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
    return {"eager": time_op(fn), "how": "torch._scaled_mm(e4m3, e4m3.t(), out bf16; fast accum off)",
            "kernels": torch_kernel_names(torch, fn)}


def int8_row():
    name, m, n, k = INT8_ROW
    return {"name": name, "op": "gemm", "phase": "fwd", "precision": "int8", "shape": {"m": m, "n": n, "k": k, "batch": 1}}


def torch_gemms(time_op, torch, out, dump_path):
    for row in gemm_rows() + [int8_row()]:
        out[row_key(row)] = torch_gemm_row(time_op, torch, row)
        print(f"torch  {row['name']:<28} {row['precision']:<9} {out[row_key(row)]['eager']['median'] * 1e6:10.1f} us",
              flush=True)
        torch.cuda.empty_cache()
        json.dump(out, open(dump_path, "w"), indent=1)
    return out


def torch_kernel_names(torch, fn):
    """The CUDA kernels one call of fn launches (torch.profiler): which library kernel PyTorch ran."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name[:160] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def run_pairs(args):
    """GEMM rows with rafter and PyTorch back to back, row by row, so that both run at the same
    power and clock state (a long series of large GEMMs throttles the SM clock). Each side's timing
    starts from the same history: for power-bound GEMMs (>= 50 us), ~2 s of its own GEMM at full
    load (rafter: its candidate search, details.search_seconds; PyTorch: --preheat seconds of
    back-to-back launches), then the same idle pause (rafter: RAFTER_GEMM_RECORD_COOLDOWN_MS,
    PyTorch: --pause), then the timing. The order alternates per pair of rows. (Without the
    preheat, PyTorch's column was timed on a cooler GPU whenever it ran first: on 10 M=4096 rows
    of one call rafter won 8 of 10 when it ran first, 3 of 10 when PyTorch did.)"""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    time_op = torch_timer()
    raf = load_json(args.out)
    tor = load_json(args.torch_out)
    tor.update({"_torch": torch.__version__, "_gpu": torch.cuda.get_device_name(0)})
    known = []  # (candidate seconds, search seconds) of the power-bound rows rafter has run
    for i, row in enumerate(gemm_rows() + [int8_row()]):
        if not wanted(args, row["name"]):
            continue
        torch.cuda.empty_cache()
        rafter_first = (i // 2) % 2 == 0  # rows come in M=4096 / M=16 pairs: alternate per pair

        def preheat(est):
            """rafter's search time for this row when it ran first, else that of the power-bound
            row rafter timed whose candidate time is nearest this GEMM's, scaled by the ratio of
            the two GEMMs' times (the search times each candidate a fixed number of times, so its
            length follows the GEMM's: unscaled, a 5 ms row once got 1.19 s where rafter's own
            search of it took 2.48 s)."""
            d = (((raf.get(row_key(row)) or {}).get("record") or {}).get("details") or {})
            if rafter_first and d.get("search_seconds"):
                return d["search_seconds"]
            if not known:
                return args.preheat
            cand, search = min(known, key=lambda p: abs(math.log(p[0] / est)))
            return search * est / cand

        def torch_side():
            tor[row_key(row)] = torch_gemm_row(time_op, torch, row, preheat, args.pause)
            print(f"torch  {row['name']:<28} {row['precision']:<9} {tor[row_key(row)]['eager']['median'] * 1e6:10.1f} us"
                  f"  {tor[row_key(row)].get('kernels')}", flush=True)

        if rafter_first:
            rafter_row(args.rafter, row, args.extra, raf)
            torch_side()
        else:
            torch_side()
            rafter_row(args.rafter, row, args.extra, raf)
        d = (((raf.get(row_key(row)) or {}).get("record") or {}).get("details") or {})
        if d.get("cooldown_before_record_ms") and d.get("search_seconds"):
            known.append((d["algorithm"]["candidate_seconds"], d["search_seconds"]))
        tor[row_key(row)]["order"] = "rafter first" if rafter_first else "torch first"
        json.dump(raf, open(args.out, "w"), indent=1)
        json.dump(tor, open(args.torch_out, "w"), indent=1)


def torch_memory_fns(torch, F):
    """PyTorch formulations of the memory-bound rows (the same math as rafter's catalogue)."""
    bf = torch.bfloat16
    eps = 1e-5

    def rmsnorm_fwd(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(bf) * w

    def rmsnorm_bwd(x, w, dy):
        xf, dyf, wf = x.float(), dy.float(), w.float()
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        dot = (dyf * wf * xf).mean(-1, keepdim=True)
        dx = (r * dyf * wf - xf * r.pow(3) * dot).to(bf)
        dw = (dyf * xf * r).sum(0)
        return dx, dw

    def swiglu_fwd(gu):
        g, u = gu.chunk(2, dim=-1)
        return F.silu(g) * u

    def swiglu_bwd(gu, dy):
        g, u = gu.float().chunk(2, dim=-1)
        s = torch.sigmoid(g)
        dyf = dy.float()
        return torch.cat([dyf * u * s * (1 + g * (1 - s)), dyf * g * s], dim=-1).to(bf)

    def attn_softmax(s, mask, scale):
        return torch.softmax((s.float() * scale).masked_fill(mask, float("-inf")), dim=-1).to(bf)

    def rope(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def residual(a, b):
        return a + b

    def emb_fwd(ids, table):
        return F.embedding(ids, table)

    def emb_bwd(ids, dy, dw):
        return dw.index_add_(0, ids, dy.float())

    def ce_fwd(z, labels):
        return F.cross_entropy(z.float(), labels, reduction="none")

    def ce_bwd(z, labels):
        p = torch.softmax(z.float(), dim=-1)
        return (p - F.one_hot(labels, z.shape[-1]).float()).to(bf)

    def adamw(p, m, v, g, lr=1e-3, b1=0.9, b2=0.95, e=1e-8, wd=0.1, step=10):
        gf = g.float()
        m.mul_(b1).add_(gf, alpha=1 - b1)
        v.mul_(b2).addcmul_(gf, gf, value=1 - b2)
        upd = (m / (1 - b1 ** step)) / ((v / (1 - b2 ** step)).sqrt() + e)
        p.sub_(lr * (upd + wd * p))
        return p.to(bf)

    return dict(rmsnorm_fwd=rmsnorm_fwd, rmsnorm_bwd=rmsnorm_bwd, swiglu_fwd=swiglu_fwd, swiglu_bwd=swiglu_bwd,
                attn_softmax=attn_softmax, rope=rope, residual=residual, emb_fwd=emb_fwd, emb_bwd=emb_bwd,
                ce_fwd=ce_fwd, ce_bwd=ce_bwd, adamw=adamw)


def memory_inputs(torch, name, shape):
    """(function key, argument tuple) for one memory-bound row."""
    bf, dev = torch.bfloat16, "cuda"
    r = lambda *s: torch.randn(*s, device=dev, dtype=bf)  # noqa: E731
    t = shape.get("tokens")
    if name.startswith("rmsnorm fwd"):
        h = shape["hidden"]
        return "rmsnorm_fwd", (r(t, h), r(h))
    if name.startswith("rmsnorm bwd"):
        h = shape["hidden"]
        return "rmsnorm_bwd", (r(t, h), r(h), r(t, h))
    if name.startswith("swiglu fwd"):
        return "swiglu_fwd", (r(t, 2 * 11008),)
    if name.startswith("swiglu bwd"):
        return "swiglu_bwd", (r(t, 2 * 11008), r(t, 11008))
    if name.startswith("attn softmax"):
        b, h, s = shape["batch"], shape["heads"], shape["seq"]
        mask = torch.ones(s, s, device=dev, dtype=torch.bool).triu(1)
        return "attn_softmax", (r(b, h, s, s), mask, 1 / math.sqrt(shape["head_dim"]))
    if name.startswith("rope"):
        pos = torch.arange(t, device=dev) % shape["seq"]
        inv = 10000.0 ** (-torch.arange(0, 128, 2, device=dev).float() / 128)
        ang = torch.cat([pos[:, None] * inv[None]] * 2, dim=-1)[:, None, :]
        return "rope", (r(t, 32, 128), ang.cos().to(bf), ang.sin().to(bf))
    if name.startswith("residual"):
        return "residual", (r(t, 4096), r(t, 4096))
    if name.startswith("embedding fwd"):
        return "emb_fwd", (torch.randint(0, 32000, (t,), device=dev), r(32000, 4096))
    if name.startswith("embedding bwd"):
        return "emb_bwd", (torch.randint(0, 32000, (t,), device=dev), r(t, 4096),
                           torch.zeros(32000, 4096, device=dev))
    if name.startswith("cross-entropy fwd"):
        return "ce_fwd", (r(t, 32000), torch.randint(0, 32000, (t,), device=dev))
    if name.startswith("cross-entropy bwd"):
        return "ce_bwd", (r(t, 32000), torch.randint(0, 32000, (t,), device=dev))
    if name.startswith("adamw"):
        n = shape["params"]
        f = lambda: torch.randn(n, device=dev)  # noqa: E731
        return "adamw", (f(), f() * 1e-2, f().abs() * 1e-4, r(n) * 1e-2)
    raise KeyError(name)


def torch_copy_bandwidth(torch):
    """cudaMemcpy device-to-device (tensor.copy_ of 2 GiB), bytes read + written per second."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").fill_(1)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e-3)
    ts.sort()
    return 2 * a.numel() * 2 / ts[len(ts) // 2]


def inductor_configs(cache, since):
    """The configurations Inductor's autotuner kept (XBLOCK, num_warps, ...), from the .best_config
    files written under `cache` at or after `since` (time.time()); [] where none was written."""
    keys = ("XBLOCK", "YBLOCK", "RBLOCK", "R0_BLOCK", "num_warps", "num_stages")
    found = []
    for root, _, files in os.walk(cache):
        for name in sorted(files):
            path = os.path.join(root, name)
            if not name.endswith(".best_config"):
                continue
            try:
                if os.path.getmtime(path) >= since:
                    with open(path) as f:
                        found.append({k: v for k, v in json.load(f).items() if k in keys})
            except (OSError, ValueError):
                continue
    return found


def run_torch(args):
    # A fresh Inductor cache unless one is given, so that its autotuner chooses again in this run and
    # the choice it keeps for each row is recorded: its two configurations of the AdamW kernel
    # differ by 0.7-0.9 % on the H200 (bench/true_roofs_results.md).
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # (a temporary folder only where none is given)
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    time_op = torch_timer()
    out = load_json(args.out) if args.append else {}
    out.update({"_torch": torch.__version__, "_gpu": torch.cuda.get_device_name(0)})
    out["_copy_bytes_per_second"] = torch_copy_bandwidth(torch)
    print(f"torch  cudaMemcpy D2D copy: {out['_copy_bytes_per_second'] / 1e12:.3f} TB/s", flush=True)
    json.dump(out, open(args.out, "w"), indent=1)
    if not args.skip_gemm:
        torch_gemms(time_op, torch, out, args.out)
    fns = torch_memory_fns(torch, F)
    for name, op, phase, shape in MEM_ROWS:
        if not wanted(args, name):
            continue
        row = {"op": op, "phase": phase, "precision": "bf16", "shape": shape}
        key, inputs = memory_inputs(torch, name, shape)
        eager = fns[key]
        entry = {"eager": time_op(lambda: eager(*inputs), reps=7)}
        try:
            t0 = time.time()
            comp = torch.compile(eager)
            comp(*inputs)
            entry["compile_seconds"] = time.time() - t0
            entry["inductor_configs"] = inductor_configs(cache, t0)
            entry["compiled"] = time_op(lambda: comp(*inputs), reps=7)
        except Exception as e:  # noqa: BLE001 (report, do not hide)
            entry["compiled_error"] = repr(e)[:300]
        out[row_key(row)] = entry
        c = entry.get("compiled", {}).get("median", float("nan"))
        kept = " ".join(",".join(f"{k}={v}" for k, v in cfg.items()) for cfg in entry.get("inductor_configs", []))
        print(f"torch  {name:<28} eager {entry['eager']['median'] * 1e6:9.1f} us  compile {c * 1e6:9.1f} us"
              + (f"  ({kept})" if kept else ""), flush=True)
        del inputs
        torch.cuda.empty_cache()
        json.dump(out, open(args.out, "w"), indent=1)


# ---------------------------------------------------------------- Nsight Compute
NCU_ROWS = [
    {"name": "gemm bf16 4096x4096x4096", "op": "gemm", "phase": "fwd", "precision": "bf16",
     "shape": {"m": 4096, "n": 4096, "k": 4096, "batch": 1}},
    {"name": "gemm bf16 decode 16x4096x4096", "op": "gemm", "phase": "fwd", "precision": "bf16",
     "shape": {"m": 16, "n": 4096, "k": 4096, "batch": 1}},
    {"name": "gemm fp8 4096x22016x4096", "op": "gemm", "phase": "fwd", "precision": "fp8_e4m3",
     "shape": {"m": 4096, "n": 22016, "k": 4096, "batch": 1}},
] + [{"name": n, "op": o, "phase": p, "precision": "bf16", "shape": s} for n, o, p, s in MEM_ROWS
     if o in ("rmsnorm", "swiglu", "residual_add", "cross_entropy", "rope")][:6]

SKIP_KERNELS = re.compile(r"l2_read_flush|fill_uniform")


def ncu_launch_seconds(stdout):
    """Median over launches of the operator's kernels between two flush kernels, from ncu --csv."""
    launches, current, seen_flush = [], [], False
    lines = stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    rows = list(csv.DictReader(lines[start:])) if start is not None else []
    names = set()
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        kname, unit = r.get("Kernel Name", ""), r.get("Metric Unit", "")
        try:
            v = float(r.get("Metric Value", "").replace(",", ""))
        except ValueError:
            continue
        v *= {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
              "second": 1.0, "s": 1.0}.get(unit, 1e-9)
        if SKIP_KERNELS.search(kname):
            if seen_flush and current:
                launches.append(sum(current))
            current, seen_flush = [], "l2_read_flush" in kname
            continue
        if seen_flush:
            current.append(v)
            names.add(kname[:160])
    launches.sort()
    return (launches[len(launches) // 2] if launches else None), len(launches), sorted(names)


def run_ncu(args):
    """Per row: rafter's own time (plain run), then the same command under ncu; the operator's
    launches are the kernels between two flush kernels (the timed graphs), summed per launch.
    Two cache policies: `none` (the verdict: rafter's own read-flush runs before every launch, so
    L2 is cold in both, and nothing else is reset) and ncu's default `all` (which also invalidates
    the instruction, constant and descriptor caches before each kernel: about 1-2 us more for a
    cuBLASLt kernel, which matters below ~50 us)."""
    out = {}
    for row in NCU_ROWS:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.json")
            cmd = rafter_cmd(args.rafter, row, path, args.extra)
            env = dict(os.environ, RAFTER_CUBLASLT_ALGO="heuristic")  # the same algorithm in both runs
            subprocess.run(cmd, capture_output=True, text=True, env=env)
            rec = json.load(open(path))["records"][0] if os.path.exists(path) else None
            raf = rec and rec.get("time") and rec["time"]["value"]
            entry = {"rafter_seconds": raf}
            for mode in ("none", "all") if row["op"] == "gemm" else ("none",):
                ncu = ["ncu", "--clock-control", "none", "--cache-control", mode, "--metrics",
                       "gpu__time_duration.sum", "--csv", "--launch-count", "120"] + \
                    rafter_cmd(args.rafter, row, os.path.join(d, "ncu-run.json"), args.extra)
                p = subprocess.run(ncu, capture_output=True, text=True, env=env)
                med, count, names = ncu_launch_seconds(p.stdout)
                key = "ncu_seconds" if mode == "none" else "ncu_all_seconds"
                entry.update({key: med, key.replace("seconds", "launches"): count, "kernels": names,
                              "cmd_" + mode: " ".join(ncu[:10]) + " <rafter profile ...>"})
                if not count:
                    entry["stderr_" + mode] = p.stderr[-300:]
            out[row["name"]] = entry
            dev = lambda c: (raf / c - 1) * 100 if raf and c else float("nan")  # noqa: E731
            print(f"ncu    {row['name']:<32} rafter {(raf or float('nan')) * 1e6:9.1f} us  ncu(cache none) "
                  f"{(entry['ncu_seconds'] or float('nan')) * 1e6:9.1f} us {dev(entry['ncu_seconds']):+.1f}%  "
                  f"ncu(cache all) {(entry.get('ncu_all_seconds') or float('nan')) * 1e6:9.1f} us "
                  f"{dev(entry.get('ncu_all_seconds')):+.1f}%  kernels {entry['kernels']}", flush=True)
            json.dump(out, open(args.out, "w"), indent=1)  # after every row: a timeout keeps the rest


# ---------------------------------------------------------------- tables
def fmt_us(s):
    return f"{s * 1e6:10.1f}" if s else f"{'-':>10}"


def torch_kernel_short(names):
    """'nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT' -> '256x128/1x2' (+ '/splitK')."""
    for nm in names or []:
        m = re.search(r"nvjet_sm90_[a-z]+_(\d+x\d+)_\d+x\d+_(\d+x\d+)", nm)
        if m:
            return f"{m.group(1)}/{m.group(2)}" + ("/splitK" if "splitK" in nm else "")
    return (names or ["-"])[-1][:18]


def same_kernel(algorithm, torch_kernels):
    """Whether rafter's cuBLASLt algorithm (tile, cluster, split-K 1) is the nvjet kernel PyTorch ran:
    then a gap between the two columns is one side's run-to-run spread, not a choice."""
    short = torch_kernel_short(torch_kernels)
    cluster = algorithm.get("cluster", "")
    return (algorithm.get("split_k") == 1 and cluster.endswith("x1")
            and short == f"{algorithm.get('tile')}/{cluster[:-2]}")


def against_peer(t, stats, peer):
    """rafter's median t (its samples' stats) against a peer's {min, median, max}: "yes" when t is at
    most the peer's median; "tie" when slower but each median lies inside the other's [min, max]
    (a difference inside the run-to-run spread); "NO" otherwise; None without both."""
    tp = (peer or {}).get("median")
    if not t or not tp:
        return None
    if t <= tp:
        return "yes"
    return "tie" if t <= peer.get("max", 0) and tp >= (stats or {}).get("min", float("inf")) else "NO"


def table(args):
    load = lambda p: json.load(open(p)) if p and os.path.exists(p) else {}  # noqa: E731
    raf, tor = load(args.rafter_json), load(args.torch_json)
    probe_bw, rejected = None, []
    if args.machine and os.path.exists(args.machine):
        m = json.load(open(args.machine))
        for c in m.get("ceilings", []):
            if c.get("kind") == "bandwidth" and c.get("resource") == "HBM" and c.get("operation") == "copy" \
                    and not c.get("params", {}).get("small_operators_below_bytes"):  # the level's roof only
                if c.get("flag") == "above_datasheet":  # a sweep plateau that L2 inflated: not a ceiling
                    rejected.append(c["figure"]["value"])
                    continue
                probe_bw = max(probe_bw or 0, c["figure"]["value"])
    memcpy_bw = tor.get("_copy_bytes_per_second")
    copy_bw = probe_bw or memcpy_bw or float("nan")
    source = "rafter probe cuda.bandwidth (HBM copy, stream)" if probe_bw else "cudaMemcpy D2D measured by this script"
    if rejected:
        source += f"; ignored {', '.join(f'{v / 1e12:.2f}' for v in rejected)} TB/s flagged above the datasheet"
    facts = next((((v.get("record") or {}).get("details") or {}).get("gpu") for k, v in raf.items()
                  if not k.startswith("_") and ((v.get("record") or {}).get("details") or {}).get("gpu")), {}) or {}
    print(f"GPU: {tor.get('_gpu')}  torch {tor.get('_torch')}  rafter: {facts.get('gpu', '?')}, driver "
          f"{facts.get('driver_version', '?')}, CUDA runtime {facts.get('cuda_runtime_version', '?')}, "
          f"cuBLASLt {facts.get('cublaslt_version', '?')}")
    print(f"HBM copy bandwidth (85% target base): {copy_bw / 1e12:.3f} TB/s from {source}; "
          f"cudaMemcpy D2D in the same call: {(memcpy_bw or 0) / 1e12:.3f} TB/s")
    fails = []
    ties = []
    same_kernel_fails = 0
    print("\n== GEMMs (forward, Y = X·Wᵀ), cold L2: rafter (timed candidates) vs PyTorch, each min/median/max "
          "over its samples; ratio of medians; heat s: seconds of full load before the pause and the timing "
          "(rafter's search / PyTorch's preheat)\n   ok: yes = rafter's median <= PyTorch's; tie = slower, but each "
          "median lies inside the other's [min, max] (a difference inside the run-to-run spread); NO otherwise, "
          "marked (same kernel) where rafter's algorithm is the nvjet kernel PyTorch ran")
    print(f"{'row':<26}{'prec':<9}{'rafter min/med/max us':>24}{'torch min/med/max us':>24}{'ratio':>7}{'TFLOP/s':>8}"
          f" heat s  rafter tile/cluster/splitK #rank/cands  torch kernel   ok")
    for row in gemm_rows():
        k = row_key(row)
        rec = (raf.get(k) or {}).get("record") or {}
        tfig = rec.get("time") or {}
        t = tfig.get("value")
        rst = tfig.get("stats") or {}
        te = (tor.get(k) or {}).get("eager", {})
        tt = te.get("median")
        s = row["shape"]
        tf = 2 * s["m"] * s["n"] * s["k"] / t / 1e12 if t else 0
        al = (rec.get("details") or {}).get("algorithm") or {}
        good = bool(t and tt and rec.get("status") == "ok")
        v = against_peer(t, rst, te) if good else None
        ok, tie = v == "yes", v == "tie"
        same = same_kernel(al, (tor.get(k) or {}).get("kernels"))
        verdict = "yes" if ok else "tie" if tie else "NO (same kernel)" if same else "NO"
        if tie:
            ties.append(f"{row['name']} {row['precision']}")
        elif not ok:
            fails.append(f"gemm {row['name']} {row['precision']}")
            same_kernel_fails += same
        heat = lambda r, tr, t_: (f"{(r.get('details') or {}).get('search_seconds', 0):.1f}/"  # noqa: E731
                                  f"{(tr.get('eager') or {}).get('preheat_s', 0):.1f}")
        spread = lambda lo, mid, hi: f"{(lo or 0) * 1e6:7.1f}/{(mid or 0) * 1e6:7.1f}/{(hi or 0) * 1e6:7.1f}"  # noqa: E731
        print(f"{row['name']:<26}{row['precision']:<9}{spread(rst.get('min'), t, rst.get('max')):>24}"
              f"{spread(te.get('min'), tt, te.get('max')):>24}{(t / tt if t and tt else float('nan')):7.3f}{tf:8.1f}"
              f" {heat(rec, tor.get(k) or {}, t):>6}"
              f"  {al.get('tile', '?')}/{al.get('cluster', '?')}/{al.get('split_k', '?')} "
              f"#{al.get('candidate_rank', '?')}/{al.get('candidates', '?')}"
              f"{'h' if al.get('candidate_rank', 99) < (rec.get('details') or {}).get('heuristic_candidates', 99) else 'v'}"
              f"  {torch_kernel_short((tor.get(k) or {}).get('kernels')):<14} {verdict}")
    n_rows = len(gemm_rows())
    print(f"GEMM rows: {n_rows - len(ties) - sum(f.startswith('gemm ') for f in fails)} yes, {len(ties)} tie within "
          f"the spread ({', '.join(ties) or 'none'}), {sum(f.startswith('gemm ') for f in fails)} NO "
          f"({same_kernel_fails} of them the same kernel on both sides)")
    name, m, n, k_ = INT8_ROW
    row = {"op": "gemm", "phase": "fwd", "precision": "int8", "shape": {"m": m, "n": n, "k": k_, "batch": 1}}
    rec = (raf.get(row_key(row)) or {}).get("record") or {}
    t = (rec.get("time") or {}).get("value")
    ti = (tor.get(row_key(row)) or {})
    tt, ttn = ti.get("eager", {}).get("median"), ti.get("eager_tn", {}).get("median")
    speed = tt / t if t and tt else float("nan")
    print(f"\n== INT8 8192^3: rafter {fmt_us(t)} us ({2 * m * n * k_ / t / 1e12 if t else 0:.0f} TOP/s); "
          f"torch._int_mm {fmt_us(tt)} us; speed-up {speed:.2f}x (target >= 5x)"
          f"{'' if speed >= 5 else '  NOT MET'}; torch._int_mm with b as bt.t() (TN) {fmt_us(ttn)} us")
    if not speed >= 5:
        fails.append("int8 5x")
    print(f"\n== Memory-bound kernels (BF16, 16384 tokens), cold L2; GB/s over the catalogue's compulsory bytes; "
          f"ok: target >= 85% of {copy_bw / 1e12:.3f} TB/s; vs compile: rafter's median against torch.compile's "
          f"(yes / tie inside both spreads / NO, as the GEMM rows)")
    print(f"{'row':<30}{'MB':>9}{'rafter us':>10}{'GB/s':>7}{'%copy':>7}{'%memcpy':>8}{'eager us':>10}{'compile us':>11}"
          f"  ok  vs compile")
    for name, op, phase, shape in MEM_ROWS:
        row = {"op": op, "phase": phase, "precision": "bf16", "shape": shape}
        rec = (raf.get(row_key(row)) or {}).get("record") or {}
        t = (rec.get("time") or {}).get("value")
        b = rec.get("compulsory_bytes") or 0
        e = tor.get(row_key(row)) or {}
        te, tc = e.get("eager", {}).get("median"), e.get("compiled", {}).get("median")
        frac = b / t / copy_bw if t and b else 0
        ok = frac >= 0.85 and rec.get("status") == "ok"
        if not ok:
            fails.append(name)
        fm = b / t / memcpy_bw if t and b and memcpy_bw else 0
        vc = against_peer(t, (rec.get("time") or {}).get("stats"), e.get("compiled"))
        if vc == "NO":
            fails.append(f"{name} vs torch.compile")
        print(f"{name:<30}{b / 1e6:9.0f}{fmt_us(t)}{b / t / 1e9 if t else 0:7.0f}{frac * 100:6.1f}%{fm * 100:7.1f}%"
              f"{fmt_us(te)}{fmt_us(tc)}"
              f"  {'yes' if ok else 'NO '} {vc or '-'}"
              f"{'' if rec.get('status') == 'ok' else ' (' + str(rec.get('status')) + ')'}")
    if args.ncu_json and os.path.exists(args.ncu_json):
        print("\n== rafter vs Nsight Compute gpu__time_duration (--clock-control none), target within 3% for >= 10 us;"
              "\n   verdict on --cache-control none (rafter's read-flush before each launch leaves L2 cold either way);"
              " ncu's default --cache-control all beside it")
        print(f"{'row':<36}{'rafter':>10}    {'ncu none':>10}    {'diff':>7}  ok  {'ncu all':>10}    {'diff':>7}")
        for name, v in json.load(open(args.ncu_json)).items():
            r, c, ca = v.get("rafter_seconds"), v.get("ncu_seconds"), v.get("ncu_all_seconds")
            d = (r / c - 1) * 100 if r and c else float("nan")
            da = (r / ca - 1) * 100 if r and ca else float("nan")
            ok = bool(r and c and (c < 10e-6 or abs(d) <= 3))
            if not ok:
                fails.append("ncu " + name)
            print(f"{name:<36}{fmt_us(r)} us {fmt_us(c)} us  {d:+6.1f}%  {'yes' if ok else 'NO '} {fmt_us(ca)} us  {da:+6.1f}%")
    print("\nrows missing a target: " + (", ".join(fails) if fails else "none"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("rafter")
    a.add_argument("--only", help="regular expression: only the rows whose name it matches")
    a.add_argument("--rafter", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--extra", nargs="*", default=[])
    a.add_argument("--skip-gemm", action="store_true")
    a.add_argument("--append", action="store_true", help="add to an existing --out")
    t = sub.add_parser("torch")
    t.add_argument("--only", help="regular expression: only the rows whose name it matches")
    t.add_argument("--out", required=True)
    t.add_argument("--skip-gemm", action="store_true")
    t.add_argument("--append", action="store_true", help="add to an existing --out")
    pr = sub.add_parser("pairs")
    pr.add_argument("--only", help="regular expression: only the rows whose name it matches")
    pr.add_argument("--rafter", required=True)
    pr.add_argument("--out", required=True, help="rafter records (JSON)")
    pr.add_argument("--torch-out", required=True, help="PyTorch timings (JSON)")
    pr.add_argument("--extra", nargs="*", default=[])
    pr.add_argument("--preheat", type=float, default=1.5,
                    help="seconds of back-to-back launches before PyTorch's pause for GEMMs >= 50 us when no "
                         "rafter search time is known yet (else rafter's details.search_seconds)")
    pr.add_argument("--pause", type=float, default=1.0,
                    help="idle seconds before each PyTorch timing (rafter pauses as long before its record: "
                         "RAFTER_GEMM_RECORD_COOLDOWN_MS)")
    n = sub.add_parser("ncu")
    n.add_argument("--rafter", required=True)
    n.add_argument("--out", required=True)
    n.add_argument("--extra", nargs="*", default=[])
    tb = sub.add_parser("table")
    tb.add_argument("rafter_json")
    tb.add_argument("torch_json")
    tb.add_argument("--machine")
    tb.add_argument("--ncu-json")
    args = ap.parse_args()
    {"rafter": run_rafter, "torch": run_torch, "pairs": run_pairs, "ncu": run_ncu, "table": table}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
