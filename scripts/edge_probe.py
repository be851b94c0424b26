"""GEMM tiles at M's edge: the template's run-time-M kernel with the edge tile shifted inside the
tensor (``shift_edges``, :func:`search_spaces.gemm.tile_start`) and without it (the box clipped
by TMA), beside ``torch.matmul``, over M values around tile-row boundaries.

Why: in the range storage of 2026-11-26 a 256x128 tile ran at 0.061 ms at m=784 and at 0.048 ms
at m=999, the same grid; the last tile row of 784 has 16 rows inside the tensor. Each kernel is
compiled once (M a run-time value), each size gets fresh random inputs, every output is checked
against float64 and the two variants' outputs compared bit for bit; then all are timed
interleaved in the same rounds (L2 flushed, CUDA events; the runner's ``rounds``). Prints each kernel's median, its ratio
to the clipped kernel with the quartiles of the per-round ratios, and writes ``edge_probe.json``
under ``out``. A probe of the template, not a result of the search.

usage: python scripts/edge_probe.py out=$OUT [rounds=60] [workers=15]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

BASE = dict(split_k=1, swap_ab=False, tma=True, raster="row", persistent=False)
CONFIGS = {  # the winners of the 4096x4096 range's sizes, 2026-11-26
    "256x128 smem": dict(block_m=256, block_n=128, block_k=64, num_stages=4, threads=256, panel_size=16,
                         warp_policy="full_row", epilogue="smem", warp_specialize="on"),
    "128x256 direct": dict(block_m=128, block_n=256, block_k=64, num_stages=4, threads=256, panel_size=8,
                           warp_policy="full_row", epilogue="direct", warp_specialize="on"),
    "128x128 smem": dict(block_m=128, block_n=128, block_k=128, num_stages=3, threads=256, panel_size=16,
                         warp_policy="full_col", epilogue="smem", warp_specialize="on"),
    "64x128 no-ws": dict(block_m=64, block_n=128, block_k=128, num_stages=3, threads=128, panel_size=8,
                         warp_policy="full_col", epilogue="smem", warp_specialize="off"),
}
PROBLEMS = [  # (n, k, dtype, layout, configs, sizes)
    (4096, 4096, "bfloat16", "nt", list(CONFIGS),
     [64, 200, 259, 286, 520, 760, 769, 776, 784, 800, 880, 999, 1024, 1448, 1540, 2657, 4870]),
    (4000, 4096, "bfloat16", "nt", ["256x128 smem", "128x256 direct"], [784, 999, 2048]),
    (4096, 4096, "float16", "nn", ["256x128 smem", "128x256 direct"], [784, 999, 2048]),
]


def compile_one(n: int, k: int, dtype: str, layout: str, name: str, shift: bool) -> Any:
    import tilelang
    import tilelang.language as T

    from search_spaces import gemm
    from tilesearch.target import Target

    config = {**BASE, **CONFIGS[name]}
    target = Target.from_arch("sm_90a")
    knobs = {key: v for key, v in config.items() if key != "warp_specialize"}
    program = gemm.gemm_program(T.dynamic("m"), n, k, dtype, layout, **knobs, num_sms=target.num_sms,
                                shift_edges=shift)
    problem = gemm.GemmOp().problem(m=1024, n=n, k=k, dtype=dtype, layout=layout)
    return tilelang.compile(program, target=target.tvm(),
                            pass_configs=gemm.GemmOp().pass_configs(problem, config) or None)


def _warm(args: tuple) -> str:
    try:
        compile_one(*args)
        return ""
    except Exception as e:  # noqa: BLE001
        return f"{args}: {e}"[-300:]


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    out = Path(opts.get("out") or os.environ.get("OUT") or "edge-probe-out")
    out.mkdir(parents=True, exist_ok=True)
    rounds = int(opts.get("rounds", 60))
    jobs = [(n, k, dt, lay, name, shift) for n, k, dt, lay, names, _ in PROBLEMS for name in names for shift in (False, True)]
    with ProcessPoolExecutor(int(opts.get("workers", 15))) as pool:  # fills TileLang's cache
        for err in pool.map(_warm, jobs):
            if err:
                print("compile failed:", err, flush=True)
    import tilelang  # noqa: F401  (before tvm)
    import torch

    from tilesearch.runner.measure import MeasureSettings
    from tilesearch.runner.measure import rounds as timed_rounds

    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    report, table = [], []
    for n, k, dtype, layout, names, sizes in PROBLEMS:
        kernels = {(name, shift): compile_one(n, k, dtype, layout, name, shift) for name in names for shift in (False, True)}
        for m in sizes:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(m)
            dt = getattr(torch, dtype)
            a = torch.randn(m, k, device="cuda", generator=gen).to(dt)
            b = torch.randn((n, k) if layout == "nt" else (k, n), device="cuda", generator=gen).to(dt)
            ref = a.double() @ (b.double().T if layout == "nt" else b.double())
            scale = ref.abs().max().item()
            fns, labels, outs = [], [], {}
            for (name, shift), kernel in kernels.items():
                c = torch.empty(m, n, device="cuda", dtype=dt)
                kernel(a, b, c)
                torch.cuda.synchronize()
                err = (c.double() - ref).abs().max().item() / scale
                outs[(name, shift)] = c.clone()
                row = {"n": n, "k": k, "dtype": dtype, "layout": layout, "m": m, "config": name, "shift": shift,
                       "max_err": err}
                report.append(row)
                if err > 2e-2:
                    print(f"WRONG n={n} m={m} {name} shift={shift}: {err:.3g}", flush=True)
                    continue
                fns.append(lambda kernel=kernel, c=c, a=a, b=b: kernel(a, b, c))
                labels.append((name, shift))
            same = {name: bool(torch.equal(outs[(name, False)], outs[(name, True)]))
                    for name in names if (name, False) in outs and (name, True) in outs}
            bt = b.T if layout == "nt" else b
            fns.append(lambda a=a, bt=bt: torch.matmul(a, bt))
            labels.append(("torch", None))
            for fn in fns * 5:
                fn()
            # the runner's interleaved rounds (L2 flushed before every run), at least ``rounds`` of them
            ms = timed_rounds(fns, replace(MeasureSettings(), min_reps=rounds), l2_bytes)
            med = {lab: statistics.median(s) for lab, s in zip(labels, ms)}
            series = dict(zip(labels, ms))
            for name in names:
                if (name, False) not in series or (name, True) not in series:
                    continue
                ratios = sorted(c / s for c, s in zip(series[(name, False)], series[(name, True)]))
                q1, mid, q3 = (ratios[int(q * (len(ratios) - 1))] for q in (0.25, 0.5, 0.75))
                line = {"n": n, "k": k, "dtype": dtype, "layout": layout, "m": m, "config": name,
                        "clip_ms": med[(name, False)], "shift_ms": med[(name, True)], "torch_ms": med[("torch", None)],
                        "clip_over_shift": mid, "q1": q1, "q3": q3, "bitwise_equal": same.get(name)}
                table.append(line)
                print(f"{n}x{k} {dtype} {layout} m={m:5d} {name:15s} clip {line['clip_ms']:.4f} shift "
                      f"{line['shift_ms']:.4f} torch {line['torch_ms']:.4f} clip/shift {mid:.3f} [{q1:.3f},{q3:.3f}] "
                      f"equal={same.get(name)}", flush=True)
            (out / "edge_probe.json").write_text(json.dumps({"checks": report, "timings": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
