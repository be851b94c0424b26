"""einsum-sum's reduce kernel (Q summed over h, split into hi/lo) at several block shapes, in one
process: Nsight Compute put it at 16 us of the two-kernel algorithms' 76-98 us at t=k=8192, h=16,
d=128 (H200, 2026-12-04), reading Q at 45% of DRAM's peak with 256 blocks of 128 threads, while a
memset of S ran at 84%. Each variant is built, checked against Q summed in float32 by torch
(hi + lo within 2e-5 of it), then all are timed interleaved with a copy of Q (the read floor), L2
flushed, and their median times printed with the quartiles.

usage: python scripts/reduce_probe.py [t=8192] [h=16] [d=128] [rounds=200] [all=1]
"""

from __future__ import annotations

import itertools
import statistics
import sys


def main(argv: list[str]) -> int:
    opts = {k: int(v) for k, v in (a.split("=", 1) for a in argv)}
    t, h, d, n_rounds = opts.get("t", 8192), opts.get("h", 16), opts.get("d", 128), opts.get("rounds", 200)
    import tilelang
    import torch

    from search_spaces.einsum_sum import padded_d, reduce_program, split_hilo
    from tilesearch.runner.measure import MeasureSettings, rounds
    from tilesearch.target import Target, detect

    target = detect() if torch.cuda.is_available() else Target.from_arch("sm_90a")

    dp = padded_d(d)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn((t, h, d), device="cuda", generator=gen).to(torch.bfloat16)
    total = torch.nn.functional.pad(q.float().sum(1), (0, dp - d))
    want = split_hilo(total, torch.bfloat16)  # hi within one bfloat16 step of it
    fns, labels = [], []
    shapes = [(32, 128, 3)] + list(itertools.product((32, 64, 128), (256,), (4, 6, 8)))
    if "all" in opts:  # the first look's shapes (H200, 2026-12-04): fewer rows were slower
        shapes = list(itertools.product((8, 16, 32), (128, 256), (2, 3, 4)))
    for rows, threads, stages in shapes:
        label = f"rows={rows} threads={threads} stages={stages}"
        if rows * dp // threads < 4 or stages * rows * dp * 2 > target.smem_per_block:
            continue
        try:
            kernel = tilelang.compile(reduce_program(t, h, d, "bfloat16", rows, threads, stages),
                                      target=target.tvm())
        except Exception as e:  # noqa: BLE001 - a variant that does not build is a line
            print(f"{label}: compile error {str(e)[-200:]}", flush=True)
            continue
        hi, lo = (torch.empty((t, dp), device="cuda", dtype=torch.bfloat16) for _ in range(2))
        kernel(q, hi, lo)
        # hi + lo carries the float32 sum to 2^-16 of it; the order of the sum may differ from torch's
        err = ((hi.float() + lo.float() - total).abs().max() / total.abs().max()).item()
        if err > 2e-5 or (hi.float() - want[0].float()).abs().max() > 2**-7 * total.abs().max():
            print(f"{label}: wrong (max error {err:.3g} of max |sum|)", flush=True)
            continue
        fns.append(lambda kernel=kernel, hi=hi, lo=lo: kernel(q, hi, lo))
        labels.append(label)
    copy = torch.empty_like(q)
    fns.append(lambda: copy.copy_(q))
    labels.append("copy of Q")
    # the runner's own interleaved rounds (L2 flushed, warmed up), exactly n_rounds of them
    settings = MeasureSettings(rep_ms=0.0, min_reps=n_rounds, max_reps=n_rounds, max_ms=1e9)
    ms = [[1000 * x for x in samples]
          for samples in rounds(fns, settings, target.l2_bytes, enough=lambda got: len(got[0]) >= n_rounds)]
    print(f"t={t} h={h} d={d}: us, median [quartiles], of {n_rounds} interleaved rounds")
    for label, samples in sorted(zip(labels, ms), key=lambda x: statistics.median(x[1])):
        q1, med, q3 = statistics.quantiles(samples, n=4)
        print(f"  {label:32s} {med:7.2f} [{q1:.2f}, {q3:.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
