#!/usr/bin/env python3
"""rafter's counted figures (run.json details.counters) against Nsight Compute's on the same kernels.

Use: counters_vs_ncu.py table OUT NAME...   (reads OUT/NAME.rafter.json and OUT/NAME.ncu.csv)
     counters_vs_ncu.py repeat OUT NAME...  (each tool against its own repeat: OUT/rafter_repeat,
                                             OUT/ncu_repeat from `counters_vs_ncu.sh ... variants`)
     counters_vs_ncu.py writeback OUT NAME... [--floor GEMM]
                                             (HBM writes with the write-back behind the launch:
                                             OUT/ncu_writeback from `counters_vs_ncu.sh ... variants`;
                                             --floor: less each tool's writes that are not the
                                             operator's, from a GEMM with a small output)
     counters_vs_ncu.py metrics RUN_JSON [--no-sass]
                                             (prints the metric list rafter counted, comma-separated;
                                             --no-sass leaves out the SASS instruction counts, which
                                             ncu's range replay cannot collect)
The ncu CSV comes from `ncu --csv --page raw --print-units base --log-file ...` over the kernels in
rafter's NVTX range rafter_counted (see counters_vs_ncu.sh); each metric is summed over its kernels.
"""
import csv
import json
import sys


def counted_record(path):
    run = json.load(open(path))
    for r in run["records"]:
        c = r.get("details", {}).get("counters", {})
        if "metrics" in c:
            return r, c
    raise SystemExit(f"{path}: no counted record ({run.get('conditions', {}).get('counters')})")


def ncu_sums(path):
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    header = rows[0]
    sums, kernels = {}, []
    for row in rows[1:]:
        rec = dict(zip(header, row))
        if not rec.get("ID", "").strip().isdigit():
            continue  # the units row
        kernels.append(rec.get("Kernel Name", "?"))
        for k, v in rec.items():
            if "__" not in k:
                continue
            try:
                sums[k] = sums.get(k, 0.0) + float(v.replace(",", ""))
            except ValueError:
                pass
    return sums, kernels


# Recorded beside rafter's figures, shown but not judged: L2 is the SMs' sectors, and these two are
# what lts__t_bytes adds (the hops over the fabric between the L2 partitions).
BESIDE = ("L2 lts__t_bytes", "L2 fabric sectors")


def derived(m):
    """The same arithmetic as collector/src/gpu_counters.cpp (gpu_work_from_metrics)."""
    out = {
        "HBM": m.get("dram__bytes_read.sum", 0) + m.get("dram__bytes_write.sum", 0),
        "HBM read": m.get("dram__bytes_read.sum", 0),
        "HBM write": m.get("dram__bytes_write.sum", 0),
        "L2": (32 * m["lts__t_sectors_srcunit_tex.sum"] if "lts__t_sectors_srcunit_tex.sum" in m
               else m.get("lts__t_bytes.sum", 0)),
        "L2 lts__t_bytes": m.get("lts__t_bytes.sum", 0),
        "L2 fabric sectors": m.get("lts__t_sectors_srcunit_ltcfabric.sum", 0),
        "shared": m.get("l1tex__t_bytes.sum", 0),
    }
    for p, key in (("d", "fp64"), ("f", "fp32"), ("h", "fp16")):
        b = "sm__sass_thread_inst_executed_op_" + p
        f = m.get(b + "add_pred_on.sum", 0) + m.get(b + "mul_pred_on.sum", 0) + 2 * m.get(b + "fma_pred_on.sum", 0)
        if f:
            out["flops " + key] = f
    if "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum" in m:
        out["shared wavefronts"] = m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
    for k, v in m.items():
        if k.startswith("sm__ops_path_tensor_src_") and v:
            out["tensor " + k[len("sm__ops_path_tensor_src_"):]] = v
    return out


def both_runs(out_dir, name):
    """Each tool's figures, first run and repeat (OUT/rafter_repeat, OUT/ncu_repeat): rafter, rafter
    again, ncu, ncu again. Raises OSError, SystemExit or IndexError where one is missing."""
    return (derived(counted_record(f"{out_dir}/{name}.rafter.json")[1]["metrics"]),
            derived(counted_record(f"{out_dir}/rafter_repeat/{name}.rafter.json")[1]["metrics"]),
            derived(ncu_sums(f"{out_dir}/{name}.ncu.csv")[0]),
            derived(ncu_sums(f"{out_dir}/ncu_repeat/{name}.ncu.csv")[0]))


def own_spread(out_dir, name):
    """Per figure, |first/repeat - 1| of rafter plus that of ncu, where both tools ran twice; {}
    otherwise."""
    try:
        a, b, c, d = both_runs(out_dir, name)
    except (OSError, SystemExit, IndexError):
        return {}
    return {k: abs(a[k] / b[k] - 1) + abs(c[k] / d[k] - 1) for k in a if b.get(k) and c.get(k) and d.get(k)}


def both_counts(out_dir, name, missing):
    """rafter's counted record and ncu's sums for one operator: (record, counters, ncu sums, ncu's
    kernels), or None after printing `missing` (formatted with name and e) where one is absent."""
    try:
        rec, c = counted_record(f"{out_dir}/{name}.rafter.json")
        n, kernels = ncu_sums(f"{out_dir}/{name}.ncu.csv")
    except (OSError, SystemExit, IndexError) as e:
        print(missing.format(name=name, e=e))
        return None
    return rec, c, n, kernels


def table(out_dir, names):
    per_op = {}  # name -> worst |rafter/ncu - 1| over its nonzero ncu figures
    # The same, each figure's difference beyond the two tools' own run-to-run spread (where measured).
    per_op_spread = {}
    # The same without HBM writes: ncu's count also holds about 2.4 MB of L2 lines left dirty before
    # its range (not the operator's) that a large launch evicts (docs/gpu-counters.md; `writeback`).
    per_op_no_write = {}
    for name in names:
        pair = both_counts(out_dir, name, "\n## {name}: no comparison ({e})")
        if pair is None:
            continue
        rec, c, n, kernels = pair
        print(f"\n## {name} ({rec['op']} {rec['precision']} {rec.get('shape')}): rafter {c['kernels']} kernels, "
              f"{c['passes']} passes, {c['seconds']:.2f} s, cache control {c.get('cache_control', '?')} "
              f"(CUPTI {c.get('cupti_version', '?')}); ncu {len(kernels)} kernels")
        print(f"{'figure':40} {'rafter':>14} {'ncu':>14} {'ratio':>8}")
        r, m = derived(c["metrics"]), derived({k: n.get(k, 0.0) for k in c["metrics"]})
        spread = own_spread(out_dir, name)
        for k in sorted(set(r) | set(m)):
            a, b = r.get(k, 0.0), m.get(k, 0.0)
            ratio = a / b if b else float("nan") if a else 1.0
            if b and k not in BESIDE:
                per_op[name] = max(per_op.get(name, 0.0), abs(ratio - 1))
                if spread and k not in ("HBM", "HBM write"):
                    beyond = max(0.0, abs(ratio - 1) - spread.get(k, 0.0))
                    per_op_spread[name] = max(per_op_spread.get(name, 0.0), beyond)
                if k not in ("HBM", "HBM write"):
                    per_op_no_write[name] = max(per_op_no_write.get(name, 0.0), abs(ratio - 1))
            print(f"{k:40} {a:14.6g} {b:14.6g} {ratio:8.4f}{'  (recorded beside)' if k in BESIDE else ''}")
        missing = [k for k in c["metrics"] if k not in n]
        if missing:
            print("ncu lacks: " + ", ".join(missing))
    if not per_op:
        print("\nnothing compared: no operator has both rafter's counts and ncu's")
        return
    print("\n## summary: worst |rafter/ncu - 1| per operator over its nonzero figures, all / all but HBM writes")
    for name, w in per_op.items():
        v = per_op_no_write.get(name, 0.0)
        print(f"{name:24} {w:9.3%}  {'within 1 %' if w <= 0.01 else 'OUTSIDE 1 %':12} {v:9.3%}  "
              f"{'within 1 %' if v <= 0.01 else 'OUTSIDE 1 %'}")
    labels = [("all figures", per_op), ("all but HBM writes", per_op_no_write)]
    if per_op_spread:
        labels.append(("all but HBM writes, beyond both tools' own repeat spread", per_op_spread))
    for label, d in labels:
        inside = sum(w <= 0.01 for w in d.values())
        print(f"{label}: {inside} of {len(d)} operators within 1 % ({len(names) - len(d)} not compared); "
              f"worst {max(d.values(), default=0.0):.3%}")


def writeback(out_dir, names, floor=None):
    """HBM writes with the write-back behind the launch: rafter's in-window count plus its range
    behind the launch (what the record's counted HBM bytes hold) against ncu's count over an NVTX
    range holding the launch and the same read-flush (variant ncu_writeback). Only writes compare:
    the range also holds the flush's reads. With `floor` (a GEMM among names whose BF16 output,
    m x n x batch x 2 bytes, is small), each tool's writes beyond that output on the floor GEMM are
    its own floor (lines dirty before the range that are not the operator's), and a last column
    compares each operator's writes less each tool's floor."""
    rows = {}
    for name in names:
        pair = both_counts(out_dir, name, "{name:20} no comparison ({e})")
        if pair is not None:
            rec, c, n, _ = pair
            rows[name] = (rec, c["metrics"].get("dram__bytes_write.sum", 0.0), c.get("hbm_written_after_bytes", 0.0),
                          n.get("dram__bytes_write.sum", 0.0))
    floors = (0.0, 0.0)
    if floor in rows:
        rec, inside, behind, theirs = rows[floor]
        shape = rec.get("shape", {})
        output = 2.0 * shape.get("m", 0) * shape.get("n", 0) * shape.get("batch", 1)
        floors = (inside + behind - output, theirs - output)
        print(f"floor ({floor}, output {output:.6g} B): rafter {floors[0]:.6g} B, ncu {floors[1]:.6g} B")
    print(f"{'operator':20} {'rafter inside':>14} {'behind':>12} {'rafter total':>13} {'ncu range':>12} {'ratio':>8}"
          + (f"  {'less floors':>12}" if floor in rows else ""))
    for name, (_, inside, behind, theirs) in rows.items():
        ratio = (inside + behind) / theirs if theirs else float("nan")
        line = (f"{name:20} {inside:14.6g} {behind:12.6g} {inside + behind:13.6g} {theirs:12.6g} {ratio:8.4f}"
                f"  {'within 1 %' if abs(ratio - 1) <= 0.01 else 'OUTSIDE 1 %'}")
        if floor in rows and name != floor and theirs > floors[1]:
            less = (inside + behind - floors[0]) / (theirs - floors[1])
            line += f"  {less:8.4f} {'within 1 %' if abs(less - 1) <= 0.01 else 'OUTSIDE 1 %'}"
        print(line)


def repeat(out_dir, names):
    """Run-to-run spread of each tool: its first count over its repeat, per figure where one moves."""
    print(f"{'operator':20} {'figure':20} {'rafter/rafter':>14} {'ncu/ncu':>10}")
    for name in names:
        try:
            a, b, c, d = both_runs(out_dir, name)
        except (OSError, SystemExit, IndexError) as e:
            print(f"{name:20} no repeat ({e})")
            continue
        for k in sorted(a):
            r = a[k] / b[k] if b.get(k) else float("nan")
            n = c[k] / d[k] if d.get(k) else float("nan")
            if abs(r - 1) > 0.003 or abs(n - 1) > 0.003:
                print(f"{name:20} {k:20} {r:14.4f} {n:10.4f}")


if __name__ == "__main__":
    if sys.argv[1] == "metrics":
        names = counted_record(sys.argv[2])[1]["metrics"]
        print(",".join(m for m in names if "--no-sass" not in sys.argv or not m.startswith("sm__sass_")))
    elif sys.argv[1] == "writeback":
        args, floor = sys.argv[3:], None
        if "--floor" in args:
            i = args.index("--floor")
            floor, args = args[i + 1], args[:i] + args[i + 2:]
        writeback(sys.argv[2], args, floor)
    elif sys.argv[1] == "repeat":
        repeat(sys.argv[2], sys.argv[3:])
    else:
        table(sys.argv[2], sys.argv[3:])
