"""Where the stream-K program's time goes: the template, its persistent loop and the stream-K
program (and two cut-down variants of it, whose results are wrong by design: ``nofix`` stores
each piece straight to C, ``noreads`` does the fix-up's writes and counting but not its reads)
built at a few mid-size shapes and timed interleaved with ``torch.matmul`` (CUDA events, L2
flushed before every call, median of the rounds). A diagnosis, not a result.

usage: python scripts/stream_k_probe.py [rounds=40] [only=o784:sk] (only: one shape and variant,
run once after warm-up, for ``ncu``)
"""

from __future__ import annotations

import os
import statistics
import sys

os.environ["TILESEARCH_STREAM_K"] = "1"

SHAPES = {"o784": (784, 4096, 4096), "qkv784": (784, 6144, 4096), "qkv1000": (1000, 6144, 4096),
          "qkv2657": (2657, 6144, 4096), "o2657": (2657, 4096, 4096)}
BASE = dict(block_k=64, threads=256, warp_policy="full_row", split_k=1, tma=True, warp_specialize="on",
            swap_ab=False, raster="row", epilogue="smem", stream_k=1, persistent=False, panel_size=8)


DIAGS = ("", "nofix")


def variants(n: int) -> dict[str, tuple[dict, str]]:
    narrow = 192 if n % 192 == 0 else 128
    out = {}
    for bn in (256, narrow):
        smem_stages = 3 if bn == 256 else 4
        out[f"tmpl_{bn}"] = (dict(BASE, block_m=128, block_n=bn, num_stages=smem_stages + 1 if bn != 256 else 4), "")
        out[f"pers_{bn}"] = (dict(BASE, block_m=128, block_n=bn, num_stages=smem_stages, persistent=True), "")
        for diag in DIAGS:
            out[f"sk{diag}_{bn}"] = (dict(BASE, block_m=128, block_n=bn, num_stages=smem_stages, persistent=True,
                                          stream_k=3), diag)
    return out


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    import torch

    from search_spaces import gemm_stream_k
    from search_spaces.gemm import GemmOp
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
        for label, (config, diag) in variants(n).items():
            if only and only != f"{name}:{label}":
                continue
            why = op.space(problem, target).why_invalid(config)
            if why:
                notes[label] = f"invalid: {why}"
                continue
            gemm_stream_k._DIAG = diag
            kernel = op.build(problem, config, target)
            c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
            kernel(a, b, c)
            torch.cuda.synchronize()
            err = ((c.double() - ref).norm() / ref.norm()).item()
            notes[label] = f"rel err {err:.1e}"
            calls[label] = (lambda kernel=kernel, c=c: kernel(a, b, c))
        gemm_stream_k._DIAG = ""
        if only:
            for fn in calls.values():
                fn()
            torch.cuda.synchronize()
            label = only.split(":")[1]
            flush.zero_()
            calls[label]()
            torch.cuda.synchronize()
            return 0
        times = {label: [] for label in calls}
        for _ in range(3):
            for fn in calls.values():
                fn()
        for _ in range(rounds):
            for label, fn in calls.items():
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times[label].append(start.elapsed_time(end) * 1e3)
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
