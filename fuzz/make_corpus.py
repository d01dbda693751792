#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from the project's own inputs:
tests/fixtures/*.json, workloads/models/*.json, workloads/recipes/*.json, a few shape strings and
one operator_cost seed per catalogue entry. JSON is minified (compact seeds fuzz faster; the
fuzzer finds whitespace by itself). Run from anywhere; it rewrites the corpus folders' seed_* files
and leaves files the fuzzer added alone."""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def compact(path, trim=None):
    doc = json.loads(path.read_text())
    return json.dumps(trim(doc) if trim else doc, separators=(",", ":")).encode()


def first_of_each(items, key, most):
    """The first item of each distinct key, at most `most` of them."""
    seen, kept = set(), []
    for item in items:
        if key(item) not in seen and len(kept) < most:
            seen.add(key(item))
            kept.append(item)
    return kept


# Small seeds beside the full fixtures: one ceiling per kind, one record per (operator, status).
# Every branch of the readers is still reached, at a fraction of the bytes each mutation re-parses.
def small_machine(doc):
    doc["ceilings"] = first_of_each(doc["ceilings"], lambda c: c["kind"], 6)
    return doc


def small_run(doc):
    doc["records"] = first_of_each(doc["records"], lambda r: (r.get("op"), r.get("status")), 5)
    return doc


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed_{name}").write_bytes(data)


def main():
    fixtures = ROOT / "tests" / "fixtures"
    machines = sorted(fixtures.glob("machine_*.json"))
    runs = sorted(fixtures.glob("run_*.json"))
    for m in machines:
        write("machine_json", m.stem, compact(m))
        write("machine_json", m.stem + "_small", compact(m, small_machine))
    for r in runs:
        write("run_json", r.stem, compact(r))
        write("run_json", r.stem + "_small", compact(r, small_run))
    for m in sorted((ROOT / "workloads" / "models").glob("*.json")):
        write("model_json", m.stem, compact(m))
    for r in sorted((ROOT / "workloads" / "recipes").glob("*.json")):
        write("recipe_json", r.stem, compact(r))
    # Each run against the H100 profile, and the BF16 run against the H200 one.
    pairs = [(r, machines[0]) for r in runs] + [(fixtures / "run_gpu_bf16.json", machines[-1])]
    for r, m in pairs:
        write("roofline_report", f"{r.stem}+{m.stem}", compact(r) + b"\0" + compact(m))
        write("roofline_report", f"{r.stem}+{m.stem}_small", compact(r, small_run) + b"\0" + compact(m, small_machine))
    shapes = ["m=4096,n=4096,k=4096", "tokens=4096,hidden=4096", "batch=1,heads=32,kv_heads=8,seq=2048,head_dim=128,causal=1",
              "params=1000000", "m=1", "causal=0", "x_1=281474976710656", ""]
    for i, s in enumerate(shapes):
        write("shape_string", f"{i}", s.encode())
    # operator_cost: operator byte, precision byte, phase byte, then (parameter index, int64) records.
    for op in range(32):
        write("operator_cost", f"op{op}", bytes([op, 0, 0]))
        write("operator_cost", f"op{op}_small", bytes([op, 1, 1]) + b"".join(
            bytes([p]) + struct.pack("<q", v) for p, v in [(0, 1), (1, 7), (2, 16), (3, 1)]))


if __name__ == "__main__":
    main()
