"""Where one configuration's compile time goes, and what compiling in batches gains.

The work of ``experiments/compile_time.py``: ``configs`` sampled valid GEMM configurations (seeded)
compiled from an empty TileLang cache by a compile pool of ``workers`` processes
(:class:`~tilesearch.builder.LocalBuilder`, as ``tune`` compiles), once per value of ``batch``
(the most configurations one worker compiles together, :mod:`tilesearch.builder.batch`; 1: each
alone), each time into a cache of its own. Each configuration reports its seconds and, of those,
the seconds in compiler processes. The kernels of every variant are checked against the first's:
the cubins TileLang keeps (inside each kernel's library) must agree byte for byte but for their
debug line tables and notes. Needs nvcc, no GPU. Writes ``compile_time.json`` under ``out`` and
prints a table last.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import struct
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tilesearch.experiment.cache import empty_tilelang_cache


def measure(args: Any) -> int:
    """Compiles the sample once per batch size and reports what each took (see the module docstring)."""
    from tilesearch import registry
    from tilesearch.builder import compiler
    from tilesearch.target import Target

    sizes = [int(b) for b in str(args.batch).split(",")]
    if compiler.chosen() == "nvrtc" and max(sizes) > 1:  # NVRTC compiles one kernel at a time
        print(f"compile_time: batch={args.batch}: batches are nvcc's; run with TILESEARCH_COMPILER=nvcc, "
              "or batch=1 for NVRTC", file=sys.stderr)
        return 2
    op, target = registry.load("gemm"), Target.from_arch(args.arch)
    problem = op.problem(m=args.m, n=args.n, k=args.k, dtype=args.dtype, layout=args.layout)
    space = op.space(problem, target)
    rng = random.Random(args.seed)
    configs: list[dict[str, Any]] = []
    while len(configs) < args.configs:
        config = space.sample(rng)  # valid
        if config not in configs:
            configs.append(config)
    with ExitStack() as caches:  # each variant's own, kept until the kernels are compared
        variants = [_variant(problem, target, configs, args.workers, b, caches.enter_context(empty_tilelang_cache(f"batch{b}")))
                    for b in sizes]
        first = variants[0]
        for variant in variants:
            variant["identical"] = _same_kernels(first["cache"], variant["cache"])
    for variant in variants:
        del variant["cache"]
    summary = {"machine": {"cpus": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
                           "processor": platform.processor() or platform.machine()},
               "problem": problem.to_dict(), "arch": args.arch, "workers": args.workers, "compiler": compiler.describe(),
               "variants": variants}
    Path(args.out, "compile_time.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"{'batch':>5} {'wall s':>7} {'configs/min':>11} {'per config s':>12} {'compilers s':>11}  identical kernels")
    for v in variants:
        same, total = v["identical"]
        print(f"{v['batch']:5d} {v['wall_s']:7.1f} {v['configs_per_min'] or 0:11.1f} {v['median_compile_s'] or 0:12.2f}"
              f" {v['median_tools_s'] or 0:11.2f}  {same} of {total}"
              + (f"  FAILED: {v['failed']}" if v["failed"] else ""))
    if len(variants) > 1 and first["configs_per_min"]:
        for v in variants[1:]:
            print(f"batch {v['batch']}: {v['configs_per_min'] / first['configs_per_min']:.2f}x the configurations per minute"
                  f" of batch {first['batch']} on {args.workers} worker(s), {len(os.sched_getaffinity(0))} usable core(s)")
    ok = all(not v["failed"] and v["identical"][0] == v["identical"][1] for v in variants)
    return 0 if ok else 1


def _variant(problem: Any, target: Any, configs: list[dict[str, Any]], workers: int, batch: int,
             cache: str) -> dict[str, Any]:
    """The configurations compiled by a fresh compile pool into ``cache``, empty and set as TileLang's."""
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Candidate

    rows = []
    with LocalBuilder(workers=workers, timeout=900, batch=batch) as builder:
        start = time.perf_counter()
        futures = [builder.submit(Candidate("gemm", problem.to_dict(), c, target)) for c in configs]
        for config, future in zip(configs, futures):
            build = future.result()
            rows.append({"config": config, "ok": build.ok, "compile_s": build.compile_s, "tools_s": build.tools_s,
                         "error": (build.error or "")[:200]})
        wall = time.perf_counter() - start
    ok = [r for r in rows if r["ok"]]
    return {"batch": batch, "cache": cache, "wall_s": wall, "configs_per_min": 60 * len(ok) / wall if wall else None,
            "median_compile_s": statistics.median(r["compile_s"] for r in ok) if ok else None,
            "median_tools_s": statistics.median(r["tools_s"] for r in ok) if ok else None,
            "failed": len(rows) - len(ok), "rows": rows}


def _same_kernels(cache: str, other: str) -> tuple[int, int]:
    """Of the kernels in both caches, how many hold the same cubins (but debug data and notes)."""
    from tilesearch.builder.batch import code_sections

    def cubins(directory: Path) -> list[dict[str, bytes]]:
        library = directory / "executable.so"
        return [code_sections(c) for c in _embedded(library.read_bytes())] if library.exists() else []

    mine = {p.name: p for p in Path(cache).rglob("kernels/*") if p.is_dir()}
    theirs = {p.name: p for p in Path(other).rglob("kernels/*") if p.is_dir()}
    both = sorted(set(mine) & set(theirs))
    same = 0
    for key in both:
        kept = cubins(mine[key])
        same += bool(kept) and kept == cubins(theirs[key])
    return same, len(both)


def _embedded(library: bytes) -> list[bytes]:
    """The ELF images inside a shared library after its own (TileLang embeds the cubin)."""
    found, at = [], library.find(b"\x7fELF", 1)
    while at > 0:
        shoff = struct.unpack_from("<Q", library, at + 0x28)[0]
        entsize, count = struct.unpack_from("<HH", library, at + 0x3A)
        end = at + shoff + entsize * count
        found.append(library[at:end])
        at = library.find(b"\x7fELF", end)
    return found
