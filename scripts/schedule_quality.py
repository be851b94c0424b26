"""How good a search's best is under the tuning loop's pipeline schedule, without a GPU (fast-tuning
issue): replays a 48-trial search of each dataset with the compile pool of the GPU host (15
workers), for many seeds, and prints the best latency found as a share of the dataset's best.

A replayed run launches, records and proposes in the same order as a run on the GPU with the same
figures (results reach the strategy in launch order, ``tests/test_pipeline.py``), so what it finds
is what the schedule lets the strategy learn. ``extra=N`` keeps N more trials in flight than the
loop does (``tuner.DEEPER``) (a deeper pipeline: more proposals made before the results they could have used).

usage: python scripts/schedule_quality.py [extra=0,8] [seeds=100] [strategy=tpe] DATASET...
  e.g. python scripts/schedule_quality.py extra=0,8,12 experiments/data/gemm_*.jsonl.gz
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from tilesearch import dataset, tune, tuner
from tilesearch.builder import NullBuilder

WORKERS = 15  # the GPU host's compile pool: 16 cores less one


class _Pool(NullBuilder):
    workers = WORKERS


def found(path: str, extra: int, seeds: int, strategy: str) -> list[float]:
    """The dataset's best latency over each seed's best found, with ``extra`` more in flight."""
    data = dataset.load(path)
    best = data.best().latency_ms
    kept, tuner.DEEPER = tuner.DEEPER, extra
    try:
        shares = []
        for seed in range(seeds):
            result = tune(data.op, data.problem, runner=f"replay:{path}", builder=_Pool(), strategy=strategy,
                          trials=48, seed=seed, storage=":memory:", progress=False)
            shares.append(best / min(r.latency_ms for r in result.best if r.latency_ms))
        return shares
    finally:
        tuner.DEEPER = kept


def main(argv: list[str]) -> None:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    paths = [a for a in argv if "=" not in a]
    extras = [int(x) for x in opts.get("extra", "0").split(",")]
    seeds, strategy = int(opts.get("seeds", 100)), opts.get("strategy", "tpe")
    print(f"{strategy}, 48 trials, {WORKERS} compile workers, seeds 0-{seeds - 1}: best found / dataset's best")
    print(f"{'dataset':44s} {'extra':>5s} {'mean':>7s} {'median':>7s} {'p25':>7s} {'min':>7s} {'>=0.97':>7s}")
    for path in paths:
        for extra in extras:
            start = time.time()
            got = sorted(found(path, extra, seeds, strategy))
            print(f"{Path(path).name.split('.')[0][:44]:44s} {extra:5d} {statistics.mean(got):7.4f} "
                  f"{statistics.median(got):7.4f} {got[len(got) // 4]:7.4f} {got[0]:7.4f} "
                  f"{sum(g >= 0.97 for g in got):4d}/{len(got)}  ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
