#!/usr/bin/env python3
"""rafter's GLA kernels (backend cuda.gla) beside flash-linear-attention's Triton kernels on the same GPU
(issue 14).

  python3 bench/gla_vs_fla.py --rafter BIN --out gla.json

Rows at GLA-1.3B's head shape (4 heads, dk 256, dv 512, chunk 64), BF16: gla_chunked forward and
backward at batch BATCHES x sequence SEQS, and the gla_decode step at batch DECODE_BATCHES. rafter: `rafter profile --op`
(checked against its FP64 reference at the catalogue's check shape, then timed: cold L2, the median).
fla: fla.ops.gla.chunk_gla and fused_recurrent_gla (one token, FP32 state in and out) with scale 1, which
is rafter's operator (o_t = q_t S_t); fla's backward is torch.autograd.grad through chunk_gla (its Triton
backward kernels: dq, dk, dv, dg from q, k, v, g, dO; the forward's graph kept), timed by rafter's method (gpu_operators_vs_pytorch.torch_timer;
eager events around each launch where a graph cannot be captured). Before timing, fla's outputs are
checked against an FP32 torch recurrence (relative L2 error), so that both columns compute the same thing.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_operators_vs_pytorch as g  # noqa: E402

HEADS, DK, DV, CHUNK = 4, 256, 512, 64
SEQS = [int(s) for s in os.environ.get("SEQS", "2048 4096 16384").split()]
BATCHES = [int(s) for s in os.environ.get("BATCHES", "1 8").split()]
DECODE_BATCHES = [int(s) for s in os.environ.get("DECODE_BATCHES", "1 8 64").split()]


def rows():
    out = []
    for b in BATCHES:
        for s in SEQS:
            for phase in ("fwd", "bwd"):
                out.append({"kind": phase, "op": "gla_chunked", "phase": phase, "precision": "bf16",
                            "shape": {"batch": b, "seq": s, "heads": HEADS, "head_dim_k": DK, "head_dim_v": DV,
                                      "chunk": CHUNK}})
    for b in DECODE_BATCHES:
        out.append({"kind": "decode", "op": "gla_decode", "phase": "fwd", "precision": "bf16",
                    "shape": {"batch": b, "heads": HEADS, "head_dim_k": DK, "head_dim_v": DV}})
    return out


def compulsory_bytes(row):
    sh = row["shape"]
    if row["kind"] == "decode":
        return sh["batch"] * HEADS * (2 * (3 * DK + 2 * DV) + 8 * DK * DV)
    if row["kind"] == "bwd":  # reads q, k, v, g, dO; writes dq, dk, dv, dg
        return 2 * sh["batch"] * sh["seq"] * HEADS * (6 * DK + 3 * DV)
    return 2 * sh["batch"] * sh["seq"] * HEADS * (3 * DK + 2 * DV)


def recurrence(torch, q, k, v, gk, state=None):
    """FP32 reference: S_t = diag(e^{g_t}) S_{t-1} + k_t^T v_t, o_t = q_t S_t; [B, T, H, d] layouts."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = torch.zeros(B, H, K, V, device=q.device) if state is None else state.clone()
    o = torch.empty(B, T, H, V, device=q.device)
    qf, kf, vf, gf = (x.float() for x in (q, k, v, gk))
    for t in range(T):
        S = S * gf[:, t].exp().unsqueeze(-1) + kf[:, t].unsqueeze(-1) * vf[:, t].unsqueeze(-2)
        o[:, t] = torch.einsum("bhk,bhkv->bhv", qf[:, t], S)
    return o, S


def rel(torch, a, b):
    return (torch.linalg.vector_norm((a.float() - b.float())) / torch.linalg.vector_norm(b.float())).item()


def inputs(torch, b, s, bf16=True):
    dt = torch.bfloat16 if bf16 else torch.float32
    q = torch.rand(b, s, HEADS, DK, device="cuda", dtype=dt) * 2 - 1
    k = torch.rand(b, s, HEADS, DK, device="cuda", dtype=dt) * 2 - 1
    v = torch.rand(b, s, HEADS, DV, device="cuda", dtype=dt) * 2 - 1
    lo, hi = math.log(0.6), math.log(0.99)
    gk = (torch.rand(b, s, HEADS, DK, device="cuda", dtype=torch.float32) * (hi - lo) + lo).to(dt)
    return q, k, v, gk


def fla_checks(torch, chunk_gla, fused_recurrent_gla, kinds):
    """fla against the FP32 recurrence for the kinds of row asked (chunk_gla's first calls compile and
    autotune its Triton kernels for minutes: a run of decode rows alone skips them)."""
    out = {}
    q1, k1, v1, g1 = inputs(torch, 8, 1)
    s0 = torch.rand(8, HEADS, DK, DV, device="cuda") * 2 - 1
    o1, s1 = fused_recurrent_gla(q1, k1, v1, gk=g1, scale=1.0, initial_state=s0, output_final_state=True)
    ref1, rs1 = recurrence(torch, q1, k1, v1, g1, s0)
    out.update({"fused_recurrent_o_rel_l2": rel(torch, o1, ref1), "fused_recurrent_state_rel_l2": rel(torch, s1, rs1)})
    if not kinds & {"fwd", "bwd"}:
        return out
    q, k, v, gk = inputs(torch, 2, 256)
    o, _ = chunk_gla(q, k, v, gk, scale=1.0)
    ref, _ = recurrence(torch, q, k, v, gk)
    out["chunk_gla_rel_l2"] = rel(torch, o, ref)
    # The backward: fla's gradients beside autograd through the FP32 recurrence (short: 64 steps).
    q, k, v, gk = (x[:, :64].detach().requires_grad_() for x in inputs(torch, 2, 64))
    do = torch.rand(2, 64, HEADS, DV, device="cuda", dtype=q.dtype) * 2 - 1
    grads = torch.autograd.grad(chunk_gla(q, k, v, gk, scale=1.0)[0], (q, k, v, gk), do)
    ref_grads = torch.autograd.grad(recurrence(torch, q, k, v, gk)[0], (q, k, v, gk), do.float())
    for name, a, b in zip(("dq", "dk", "dv", "dg"), grads, ref_grads):
        out[f"chunk_gla_{name}_rel_l2"] = rel(torch, a, b)
    return out


def eager_time(torch, fn, reps=30):
    """Cold-L2 events around each launch, no graph (g.eager_times; the fallback where capture fails)."""
    out = g.eager_times(torch, fn, reps)
    return {"median": out[len(out) // 2], "min": out[0], "max": out[-1], "method": "eager events"}


def kernel_sum_us(torch, fn, reps=10):
    """Mean µs per call of fn's GPU kernels, summed (torch.profiler; warm L2, host gaps excluded)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return sum(max(ev.device_time_total, 0) for ev in prof.key_averages()) / reps


def run_fla(rs, results):
    import torch
    from fla.ops.gla import chunk_gla, fused_recurrent_gla
    # The first calls compile and autotune fla's Triton kernels: over a minute on the H100 (a call
    # with 75 s left for fla got no row back), so say where the time goes.
    print("fla: imported; checking (compiles and autotunes the Triton kernels) ...", flush=True)
    results["_fla_check"] = fla_checks(torch, chunk_gla, fused_recurrent_gla, {r["kind"] for r in rs})
    print("fla check vs FP32 recurrence:", results["_fla_check"], flush=True)
    time_op = g.torch_timer()
    # The backward rows last, timed by eager events only: a graph capture of autograd through fla
    # failed on the H100 (cudaErrorStreamCaptureInvalidated) and left torch's RNG in capture state,
    # so every later row failed ("Offset increment outside graph capture"). Eager events include
    # the host's launch gaps; the kernels' own sum (torch.profiler) is recorded beside them.
    for row in sorted(rs, key=lambda r: r["kind"] == "bwd"):
        sh = row["shape"]
        entry = results.setdefault(g.row_key(row), {"row": row})
        if row["kind"] == "fwd":
            q, k, v, gk = inputs(torch, sh["batch"], sh["seq"])

            def fn(q=q, k=k, v=v, gk=gk):
                chunk_gla(q, k, v, gk, scale=1.0)
        elif row["kind"] == "bwd":
            q, k, v, gk = (x.requires_grad_() for x in inputs(torch, sh["batch"], sh["seq"]))
            do = torch.rand(sh["batch"], sh["seq"], HEADS, DV, device="cuda", dtype=q.dtype) * 2 - 1
            o = chunk_gla(q, k, v, gk, scale=1.0)[0]

            def fn(o=o, q=q, k=k, v=v, gk=gk, do=do):
                torch.autograd.grad(o, (q, k, v, gk), do, retain_graph=True)
        else:
            q, k, v, gk = inputs(torch, sh["batch"], 1)
            s0 = torch.rand(sh["batch"], HEADS, DK, DV, device="cuda") * 2 - 1

            def fn(q=q, k=k, v=v, gk=gk, s0=s0):
                fused_recurrent_gla(q, k, v, gk=gk, scale=1.0, initial_state=s0, output_final_state=True)
        if row["kind"] == "bwd":
            entry["fla"] = eager_time(torch, fn)
            entry["fla_kernel_sum_us"] = kernel_sum_us(torch, fn)
        else:
            try:
                entry["fla"] = time_op(fn)
            except Exception as e:  # noqa: BLE001 (a Triton launch that cannot be captured)
                entry["fla_graph_error"] = str(e)[:300]
                entry["fla"] = eager_time(torch, fn)
        print(f"fla    {row['op']:<12} {row['phase']:<4} {json.dumps(sh)} {entry['fla']['median'] * 1e6:10.1f} us", flush=True)
        del q, k, v, gk, fn
        torch.cuda.empty_cache()


def fla_kernels(shapes, phases):
    """fla's kernels one by one (torch.profiler, after the autotuning calls): name, launches, mean µs per
    call of chunk_gla (forward) or of its backward, to set beside rafter's kernels under ncu."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from fla.ops.gla import chunk_gla
    for b, s in shapes:
        q, k, v, gk = (x.requires_grad_() for x in inputs(torch, b, s))
        do = torch.rand(b, s, HEADS, DV, device="cuda", dtype=q.dtype) * 2 - 1
        for phase in phases:
            if phase == "fwd":
                def fn():
                    with torch.no_grad():
                        chunk_gla(q, k, v, gk, scale=1.0)
            else:
                o = chunk_gla(q, k, v, gk, scale=1.0)[0]

                def fn(o=o):
                    torch.autograd.grad(o, (q, k, v, gk), do, retain_graph=True)
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            reps = 10
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    fn()
                torch.cuda.synchronize()
            total = 0.0
            for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
                if ev.device_time_total <= 0:
                    continue
                total += ev.device_time_total / reps
                print(f"fla-kernel b={b} s={s} {phase} {ev.key[:70]:<70} x{ev.count // reps:<3} "
                      f"{ev.device_time_total / reps:9.1f} us", flush=True)
            print(f"fla-kernel b={b} s={s} {phase} TOTAL {total:9.1f} us per call", flush=True)


def table(rs, results):
    dev = results.get("_device", {})
    print(f"\nGPU {dev.get('name', '?')}: rafter cuda.gla vs fla (Triton), BF16, medians, cold L2")
    print(f"{'op':<12} {'phase':<5} {'batch':>5} {'seq':>6} {'rafter us':>10} {'fla us':>10} {'fla/rafter':>10} "
          f"{'rafter TB/s':>11} {'check err':>10} {'status':>8}")
    for row in rs:
        e = results.get(g.row_key(row), {})
        rec = e.get("record") or {}
        t = (rec.get("time") or {}).get("value") or float("nan")
        f = (e.get("fla") or {}).get("median") or float("nan")
        err = (rec.get("check") or {}).get("error", float("nan"))
        sh = row["shape"]
        ks = e.get("fla_kernel_sum_us")
        print(f"{row['op']:<12} {row['phase']:<5} {sh['batch']:>5} {sh.get('seq', 1):>6} {t * 1e6:10.1f} {f * 1e6:10.1f} "
              f"{f / t:10.2f} {compulsory_bytes(row) / t / 1e12:11.2f} {err:10.2e} {rec.get('status', '?'):>8}"
              + (f"  fla eager events; its kernels alone {ks:.1f} us ({ks / (t * 1e6):.2f}x)" if ks else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rafter", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--fla-kernels", help="'B:S,B:S': fla's kernel times at these shapes, then exit")
    ap.add_argument("--phases", default="fwd", help="with --fla-kernels: fwd, bwd or both (comma-separated)")
    args = ap.parse_args()
    if args.fla_kernels:
        fla_kernels([tuple(int(x) for x in p.split(":")) for p in args.fla_kernels.split(",")], args.phases.split(","))
        return
    rs = rows()
    results = g.load_json(args.out) if args.table_only else {}
    if not args.table_only:
        for row in rs:
            g.rafter_row(args.rafter, row, [], results)
            json.dump(results, open(args.out, "w"), indent=1)
        t0 = time.time()
        try:
            run_fla(rs, results)
        except Exception as e:  # noqa: BLE001 (report what rafter measured even without fla)
            print("fla failed:", repr(e)[:500], flush=True)
        print(f"fla side: {time.time() - t0:.1f} s", flush=True)
        json.dump(results, open(args.out, "w"), indent=1)
    table(rs, results)


if __name__ == "__main__":
    main()
