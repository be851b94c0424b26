"""Kernels of one tile shape or program beside each other and ``torch.matmul``, at a few mid-size
shapes: each built (whether or not today's space offers it), checked against float64 and timed
interleaved with ``torch.matmul`` (CUDA events, L2 flushed before every call, median of the
rounds). A look at the kernels, not a result of the search. Sets:

- ``stream_k``: the template, its persistent loop and the stream-K program at the same tiles.
  (At ``9ae73aa`` the program had a diagnostic switch, ``nofix``: each piece stored straight to
  C, wrong by design, which this script timed to split the fix-up's cost from the pipeline's;
  RESULTS.md has those figures.)
- ``swap``: swapped tiles whose A rows sit on the MMA's N side, which takes any multiple of 16
  up to 256, sized so the tiles fill whole waves (as cuBLAS's tiles do at these shapes: 192x208
  at 784 x 6144, 128x248 at 2657 x 6144), beside the template's kernels the range chose there.

usage: python scripts/tile_probe.py [set=stream_k|swap] [rounds=40] [only=o784:sk_256] (only: one
shape and variant, run once after warm-up, for ``ncu``)
"""

from __future__ import annotations

import os
import statistics
import sys

os.environ["TILESEARCH_STREAM_K"] = "1"

SHAPES = {"o784": (784, 4096, 4096), "o1000": (1000, 4096, 4096), "qkv784": (784, 6144, 4096),
          "qkv1000": (1000, 6144, 4096), "qkv2657": (2657, 6144, 4096), "o2657": (2657, 4096, 4096)}
BASE = dict(block_k=64, threads=256, warp_policy="full_row", split_k=1, tma=True, warp_specialize="on",
            swap_ab=False, raster="row", epilogue="smem", stream_k=1, persistent=False, panel_size=8)


def stream_k(m: int, n: int) -> dict[str, dict]:
    narrow = 192 if n % 192 == 0 else 128
    out = {}
    for bn in (256, narrow):
        smem_stages = 3 if bn == 256 else 4
        out[f"tmpl_{bn}"] = dict(BASE, block_m=128, block_n=bn, num_stages=smem_stages + 1 if bn != 256 else 4)
        out[f"pers_{bn}"] = dict(BASE, block_m=128, block_n=bn, num_stages=smem_stages, persistent=True)
        out[f"sk_{bn}"] = dict(BASE, block_m=128, block_n=bn, num_stages=smem_stages, persistent=True, stream_k=3)
    return out


def swap(m: int, n: int) -> dict[str, dict]:
    """The template's best at each size in the H200 range (6144x4096) or probe (4096x4096), and
    swapped tiles: ``block_m`` A rows (the MMA's N side, split between the two consumer warp
    groups with ``full_col``) by ``block_n`` B rows, as few row tiles as cover M."""
    narrow = 192 if n % 192 == 0 else 128
    out = {"tmpl_128x256": dict(BASE, block_m=128, block_n=256, num_stages=4),
           f"tmpl_128x{narrow}": dict(BASE, block_m=128, block_n=narrow, num_stages=5, panel_size=16),
           f"pers_128x{narrow}": dict(BASE, block_m=128, block_n=narrow, num_stages=4, panel_size=16, persistent=True)}
    rows = -(-m // 4)  # four row tiles
    for bn, policy, step in ((narrow, "full_col", 32), (128, "full_row", 16)):
        wide = min(256, -(-rows // step) * step)  # each warp group's N a multiple of 16 (else TileLang issues N=8)
        for stages in (3, 4):
            config = dict(BASE, swap_ab=True, block_m=wide, block_n=bn, num_stages=stages, warp_policy=policy)
            out[f"swap_{wide}x{bn}_{policy}_s{stages}"] = config
    if m > 2000:  # four waves of 256-row swapped tiles
        out["swap_256x128_full_row_s4"] = dict(BASE, swap_ab=True, block_m=256, block_n=128, num_stages=4)
    return out


SETS = {"stream_k": stream_k, "swap": swap}


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    import torch

    from search_spaces.gemm import GemmOp
    from tilesearch.runner.measure import MeasureSettings
    from tilesearch.runner.measure import rounds as timed_rounds
    from tilesearch.target import detect

    op, target = GemmOp(), detect()
    flush = torch.empty(2 * target.l2_bytes, dtype=torch.int8, device="cuda")
    rounds = int(opts.get("rounds", 40))
    only = opts.get("only")
    rows = []
    for name, (m, n, k) in SHAPES.items():
        if only and not only.startswith(name + ":"):
            continue
        problem = op.problem(m=m, n=n, k=k, dtype="bfloat16", layout="nt")
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1)
        a, b = op.make_inputs(problem, torch.device("cuda"), gen)
        ref = op.reference(problem, (a, b))[0]
        base = op.baseline(problem, (a, b))
        calls = {"torch": base}
        notes = {}
        for label, config in SETS[opts.get("set", "stream_k")](m, n).items():
            if only and only != f"{name}:{label}":
                continue
            why = op.space(problem, target).why_invalid(config)
            if why and "not in" not in why and "swap_ab" not in why:  # values today's space leaves out are built
                notes[label] = f"invalid: {why}"
                continue
            try:
                kernel = op.build(problem, config, target)
            except Exception as error:  # a probe reports what does not build and goes on
                notes[label] = f"build failed: {str(error).splitlines()[-1][:200]}"
                continue
            c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
            kernel(a, b, c)
            torch.cuda.synchronize()
            err = ((c.double() - ref).norm() / ref.norm()).item()
            notes[label] = f"rel err {err:.1e}" + (f"; outside today's space: {why}" if why else "")
            calls[label] = (lambda kernel=kernel, a=a, b=b, c=c: kernel(a, b, c))
        if only:
            for fn in calls.values():
                fn()
            torch.cuda.synchronize()
            label = only.split(":")[1]
            flush.zero_()
            calls[label]()
            torch.cuda.synchronize()
            return 0
        # the runner's own interleaved rounds (warmed up, L2 flushed, the host kept ahead of the
        # GPU): the probe's own loop, until 2026-12-04, synchronized after every run, so each
        # kernel's start event could be charged its Python launch
        settings = MeasureSettings(rep_ms=0.0, min_reps=rounds, max_reps=rounds, max_ms=1e9)
        labels = list(calls)
        samples = timed_rounds(list(calls.values()), settings, target.l2_bytes,
                               enough=lambda got: len(got[0]) >= rounds)
        times = {label: [ms * 1e3 for ms in column] for label, column in zip(labels, samples)}
        torch_us = statistics.median(times["torch"])
        for label, ts in times.items():
            med = statistics.median(ts)
            rows.append((name, label, med, torch_us / med, notes.get(label, "")))
        for label, note in notes.items():
            if label not in times:
                rows.append((name, label, float("nan"), float("nan"), note))
    print("\nshape | variant | us | vs torch | note")
    for row in rows:
        print(f"{row[0]} | {row[1]} | {row[2]:.1f} | {row[3]:.3f} | {row[4]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
