#!/usr/bin/env python3
"""Each memory-bound row's HBM rate against the roof of its own read:write mix (rafter's and
PyTorch's), from a machine.json with cuda.bandwidth's read/write/copy/triad ceilings and the JSON of
bench/gpu_operators_vs_pytorch.py's `rafter` and `torch` modes. The interpolation is the roofline's
(roofline/src/roofs.cpp): linear between the nearest measured mixes.

  python3 bench/mix_roofs_table.py machine.json rafter.json torch.json
"""
import json
import sys

WRITE_FRACTION = {"load": 0.0, "read": 0.0, "triad": 1 / 3, "copy": 0.5, "store": 1.0, "nt_store": 1.0, "write": 1.0}


def mixes(machine, level, small=False):
    """(write fraction, B/s) of the level's roofs, or with `small` (write fraction, (B/s, below
    bytes)) of the roofs of small operators (params.small_operators_below_bytes)."""
    best = {}
    for c in machine["ceilings"]:
        if c["kind"] != "bandwidth" or c["resource"] != level or c["scope"] != "device":
            continue
        below = c.get("params", {}).get("small_operators_below_bytes")
        if bool(below) != small:
            continue
        w, v = WRITE_FRACTION.get(c["operation"]), c["figure"]["value"]
        if w is None:
            continue
        held = best.get(w)
        if held is None or v > (held[0] if small else held):
            best[w] = (v, below) if small else v
    return sorted(best.items())


def roof_for(points, small, w, nbytes):
    """The roofline's BandwidthRoof::at: the mix's roof, or the small operators' where the row moves
    fewer bytes than their bound."""
    roof = at_mix(points, w)
    if w is None or not small:
        return roof
    if nbytes < at_mix([(x, b) for x, (_, b) in small], w):
        return max(roof, at_mix([(x, v) for x, (v, _) in small], w))
    return roof


def at_mix(points, w):
    if w is None:
        return max(v for _, v in points)
    if w <= points[0][0]:
        return points[0][1]
    for (w0, v0), (w1, v1) in zip(points, points[1:]):
        if w <= w1:
            return v0 + (w - w0) / (w1 - w0) * (v1 - v0)
    return points[-1][1]


def main():
    machine, raf, tor = (json.load(open(p)) for p in sys.argv[1:4])
    level = "HBM"
    points, small = mixes(machine, level), mixes(machine, level, True)
    print(f"{level} roofs by write fraction: " + ", ".join(f"{w:.3f}: {v / 1e12:.3f} TB/s" for w, v in points))
    if small:
        print(f"{level} roofs of small operators: " + ", ".join(
            f"{w:.3f}: {v / 1e12:.3f} TB/s below {b / 1e6:.0f} MB" for w, (v, b) in small))
    print(f"\n{'row':<30}{'write':>6}{'roof TB/s':>10}{'rafter TB/s':>12}{'eff':>7}{'compile TB/s':>13}{'eff':>7}"
          f"{'eager TB/s':>11}{'eff':>7}")
    over = []
    for key, entry in raf.items():
        if key.startswith("_") or not entry.get("record"):
            continue
        rec = entry["record"]
        b, w = rec.get("compulsory_bytes") or 0, rec.get("write_fraction")
        t = (rec.get("time") or {}).get("value")
        if not (b and t):
            continue
        roof = roof_for(points, small, w, b)
        tr = tor.get(key) or {}
        tc, te = tr.get("compiled", {}).get("median"), tr.get("eager", {}).get("median")
        rates = [b / t, b / tc if tc else float("nan"), b / te if te else float("nan")]
        effs = [r / roof for r in rates]
        name = entry["row"].get("name", rec["op"])
        print(f"{name:<30}{(w if w is not None else float('nan')):6.3f}{roof / 1e12:10.3f}"
              + "".join(f"{r / 1e12:12.3f}{e * 100:6.1f}%" for r, e in zip(rates, effs)))
        for who, e in zip(("rafter", "torch.compile", "eager"), effs):
            if e > 1.0:
                over.append(f"{name} ({who} {e * 100:.1f}%)")
    print("\nefficiency above 100% of its own mix's roof: " + (", ".join(over) if over else "none"))


if __name__ == "__main__":
    main()
