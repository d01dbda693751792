#!/usr/bin/env python3
"""Compute/communication overlap beside torch: for every record of rafter's run.json files that
carries details.overlap (cuda.nccl, a collective with overlap_m/n/k: ZeRO-3's all-gathers and
reduce-scatters beside a layer's GEMMs), torch.distributed runs the same collective (NCCL, BF16, as
many ranks) with async_op=True and then torch.matmul of the same BF16 GEMM on the current stream,
timed as rafter times them (each call after a barrier, host wall time to both done, median, the
max over ranks): collective alone, GEMM alone, both. Prints rafter's and torch's columns: time
alone, together, exposed collective time (together - GEMM alone) and the hidden fraction."""
import argparse, json, os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collectives_vs_torch import timed_across_ranks  # bench/ is the script's own folder


def cases(paths):
    out = []
    for p in paths:
        for r in json.load(open(p))["records"]:
            o = r.get("details", {}).get("overlap")
            if isinstance(o, dict):
                out.append({"label": r["label"], "op": r["op"], "phase": r["phase"], "shape": r["shape"], "rafter": o})
    return out


def worker(rank, n, args, todo, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29519")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    rows = []
    for c in todo:
        s = c["shape"]
        S = s["elements"]
        x = torch.randn(S, device="cuda").to(torch.bfloat16)
        out = torch.empty(S if c["op"] == "all_gather" else S // n, device="cuda", dtype=torch.bfloat16)
        a = torch.randn(s["overlap_m"], s["overlap_k"], device="cuda").to(torch.bfloat16)
        b = torch.randn(s["overlap_k"], s["overlap_n"], device="cuda").to(torch.bfloat16)
        y = torch.empty(s["overlap_m"], s["overlap_n"], device="cuda", dtype=torch.bfloat16)

        def coll():
            if c["op"] == "all_gather":
                return dist.all_gather_into_tensor(out, x[rank * (S // n):(rank + 1) * (S // n)], async_op=True)
            return dist.reduce_scatter_tensor(out, x, async_op=True)

        def both():
            w = coll()
            torch.matmul(a, b, out=y)
            w.wait()

        rows.append({"coll": timed_across_ranks(lambda: coll().wait(), args.repeats),
                     "gemm": timed_across_ranks(lambda: torch.matmul(a, b, out=y), args.repeats),
                     "both": timed_across_ranks(both, args.repeats)})
    if rank == 0:
        q.put(rows)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="rafter run.json files")
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    todo = cases(args.runs)
    if not todo:
        print("no record with details.overlap in", args.runs)
        return
    n = args.gpus
    if any(c["shape"]["ranks"] != n for c in todo):
        raise SystemExit(f"records' ranks differ from --gpus {n}")
    q = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(n, args, todo, q), nprocs=n, join=True)
    rows = q.get()
    print(f"{'label':<34} {'phase':<5} {'GEMM m,n,k':<18} {'':>6} {'coll ms':>8} {'gemm ms':>8} {'both ms':>8}"
          f" {'exposed ms':>10} {'hidden':>7}")
    for c, t in zip(todo, rows):
        s, o = c["shape"], c["rafter"]
        gemm = f"{s['overlap_m']},{s['overlap_n']},{s['overlap_k']}"
        for who, coll, g, both in (("rafter", o["collective_s"], o["gemm_s"]["median"], o["together_s"]["median"]),
                                   ("torch", t["coll"], t["gemm"], t["both"])):
            exposed = max(0.0, both - g)
            hidden = min(1.0, max(0.0, 1 - exposed / coll))
            print(f"{c['label']:<34} {c['phase']:<5} {gemm:<18} {who:>6} {coll * 1e3:8.3f} {g * 1e3:8.3f}"
                  f" {both * 1e3:8.3f} {exposed * 1e3:10.3f} {hidden:7.2f}")


if __name__ == "__main__":
    main()
