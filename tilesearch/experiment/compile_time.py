"""Where one configuration's compile time goes: lowering in Python, or nvcc and the host compiler.

The work of ``experiments/compile_time.py``: ``configs`` sampled valid GEMM configurations (seeded)
compiled one after another from an empty TileLang cache by a compile pool of ``workers`` processes
(:class:`~tilesearch.builder.LocalBuilder`, as ``tune`` compiles), each reporting its seconds and,
of those, the seconds in compiler processes (:func:`tilesearch.builder.local.compile_candidate`).
Needs nvcc, no GPU. Writes ``compile_time.json`` under ``out`` and prints a table last.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def measure(args: Any) -> int:
    """Compiles the sample and reports per-configuration seconds (see the module docstring)."""
    os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile-time-cache-")  # empty: all compile
    from tilesearch import registry
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Candidate
    from tilesearch.target import Target

    op, target = registry.load("gemm"), Target.from_arch(args.arch)
    problem = op.problem(m=args.m, n=args.n, k=args.k, dtype=args.dtype, layout=args.layout)
    space = op.space(problem, target)
    rng = random.Random(args.seed)
    configs: list[dict[str, Any]] = []
    while len(configs) < args.configs:
        config = space.sample(rng)  # valid
        if config not in configs:
            configs.append(config)
    rows = []
    start = time.perf_counter()
    with LocalBuilder(workers=args.workers, timeout=900) as builder:
        futures = [builder.submit(Candidate("gemm", problem.to_dict(), c, target)) for c in configs]
        for config, future in zip(configs, futures):
            build = future.result()
            rows.append({"config": config, "ok": build.ok, "compile_s": build.compile_s, "tools_s": build.tools_s,
                         "error": (build.error or "")[:200]})
    wall = time.perf_counter() - start
    ok = [r for r in rows if r["ok"]]
    summary = {"machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
               "problem": problem.to_dict(), "arch": args.arch, "workers": args.workers, "wall_s": wall,
               "configs_per_min": 60 * len(ok) / wall if wall else None,
               "median_compile_s": statistics.median(r["compile_s"] for r in ok) if ok else None,
               "median_tools_s": statistics.median(r["tools_s"] for r in ok) if ok else None, "rows": rows}
    Path(args.out, "compile_time.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"{'#':>3} {'compile s':>10} {'compilers s':>12} {'lowering s':>11}  config")
    for i, r in enumerate(rows, 1):
        knobs = ",".join(f"{k}={v}" for k, v in sorted(r["config"].items()))
        print(f"{i:3d} {r['compile_s']:10.2f} {r['tools_s']:12.2f} {r['compile_s'] - r['tools_s']:11.2f}  {knobs}"
              + ("" if r["ok"] else f"  FAILED {r['error'][:60]}"))
    if ok:
        print(f"median per configuration: {summary['median_compile_s']:.2f} s, of which compiler processes "
              f"{summary['median_tools_s']:.2f} s; {summary['configs_per_min']:.1f} configurations/min on "
              f"{args.workers} worker(s), {os.cpu_count()} cores")
    return 0 if len(ok) == len(rows) else 1
