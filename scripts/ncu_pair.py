"""Nsight Compute's view of a tuned GEMM beside the cuBLAS kernel ``torch.matmul`` launches at
the same shape: the kernels issue asks for every shape below 1.0x cuBLAS to be profiled, and the
measured reason written down. Any other operator's recorded run serves too (its baseline in
place of ``torch.matmul``), with a memset of its output after its kernels: for einsum-sum, whose
floor is writing S, the store rate to compare theirs with.

Reads the chosen configurations of a recorded model-shape run (``model_shapes.json``), builds
each, warms it and ``torch.matmul`` up on the same random inputs, then calls each once inside an
NVTX range ``prof`` (L2 flushed before, outside the range). Run it under ``ncu`` with that range:

    ncu --nvtx --nvtx-include "prof/" --section SpeedOfLight --section LaunchStats \
        --section Occupancy --csv --page details python scripts/ncu_pair.py \
        experiments/results/model_shapes/model_shapes_5bddc78.json [keys=m=8192,n=8192...;...] [every=true] > ncu.csv
    python scripts/ncu_pair.py table ncu.csv

``every=true`` profiles every tilesearch entry of a problem's re-time (variants of one kernel,
say), not only the first.

``table`` prints, per kernel in launch order (torch first, then ours, per shape), its duration,
compute and memory throughput (% of peak), DRAM throughput, grid, cluster size, registers and
achieved occupancy. A look at the hardware, not a timing: ``ncu`` serialises and replays each
kernel with its own clock control, so its durations are for comparing kernels with each other.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any

import tilelang  # noqa: F401  (before tvm)

METRICS = {  # ncu's "Metric Name" -> column
    "Duration": "us", "Compute (SM) Throughput": "SM %", "Memory Throughput": "mem %",
    "DRAM Throughput": "DRAM %", "Grid Size": "grid", "Cluster Size": "cluster",
    "Registers Per Thread": "regs", "Achieved Occupancy": "occ %",
}


def profile(path: str, keys: set[str] | None, every: bool = False) -> None:
    import torch
    from gemm_probe import pair  # scripts/, the first entry of sys.path when run as a script

    from tilesearch import registry
    from tilesearch.target import detect

    target = detect()
    report = json.load(open(path))
    name = report["experiment"]["op"]
    op = registry.load(name)
    flush = torch.empty(2 * target.l2_bytes, dtype=torch.int8, device="cuda")
    for entry in report["problems"]:
        if keys and entry["key"] not in keys:
            continue
        problem = op.problem(**entry["problem"])
        ours = [e for e in entry["retime"]["entries"] if e["kind"] == "tilesearch"]
        if not every:
            ours = ours[:1]
        calls = [pair(op, problem, e["config"], target) for e in ours]
        base = calls[0][0]
        yardsticks = []
        if name != "gemm":
            out = op.make_outputs(problem, torch.device("cuda"))[0]
            yardsticks = [("memset", out.zero_)]
        for fn in (base, *(mine for _, mine in calls), *(f for _, f in yardsticks)) * 3:
            fn()
        for who, fn in (("torch", base), *((f"ours{i}", mine) for i, (_, mine) in enumerate(calls)), *yardsticks):
            flush.zero_()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("prof")
            fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            print(f"profiled {entry['key']} {who}", file=sys.stderr, flush=True)


def table(path: str) -> None:
    text = open(path).read()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"'):])))
    kernels: dict[str, dict[str, Any]] = {}
    for row in rows:
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"][:48]})
        if row["Metric Name"] in METRICS:
            k[METRICS[row["Metric Name"]]] = f"{row['Metric Value']}{'' if row['Metric Unit'] in ('', '%') else ' ' + row['Metric Unit']}"
    cols = ["name", *METRICS.values()]
    print(" | ".join(cols))
    for k in kernels.values():
        print(" | ".join(str(k.get(c, "-")) for c in cols))


def main(argv: list[str]) -> int:
    if argv[:1] == ["table"]:
        table(argv[1])
        return 0
    opts = dict(a.split("=", 1) for a in argv[1:])
    profile(argv[0], set(opts["keys"].split(";")) if "keys" in opts else None, opts.get("every") == "true")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
