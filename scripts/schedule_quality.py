"""How good a search's best is under the tuning loop's pipeline schedule, without a GPU (fast-tuning
issue): replays a 48-trial search of each dataset with the compile pool of the GPU host (15
workers), for many seeds, and prints the best latency found as a share of the dataset's best.

A replayed run launches, records and proposes in the same order as a run on the GPU with the same
figures (results reach the strategy in launch order, ``tests/test_pipeline.py``), so what it finds
is what the schedule lets the strategy learn. ``extra=N`` keeps N more trials in flight than the
loop does (``tuner.DEEPER``) (a deeper pipeline: more proposals made before the results they could have used).

``compile=TRIALS.jsonl:SCALE`` has each build take a recorded compile time times SCALE (the runs of
``trials.jsonl``, one per seed in turn, in launch order), so that results arrive out of launch order
as on the GPU host; ``patience=A,B`` then compares values of ``tuner.PATIENCE`` (in recorded seconds,
scaled alike; ``inf`` keeps launch order), seed by seed.

usage: python scripts/schedule_quality.py [extra=0,8] [seeds=100] [strategy=tpe] [compile=T:S patience=inf,3] DATASET...
  e.g. python scripts/schedule_quality.py extra=0,8,12 experiments/data/gemm_*.jsonl.gz
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from schedule_sim import WORKERS, recorded_compiles  # (this folder: the script's own, first on the path)

from tilesearch import dataset, tune, tuner
from tilesearch.builder import NullBuilder


class _Pool(NullBuilder):
    workers = WORKERS


class _Timed(_Pool):
    """Builds nothing; the i-th build submitted finishes after ``seconds[i]`` (then at once)."""

    def __init__(self, seconds: list[float]) -> None:
        self.seconds, self.pool = list(seconds), ThreadPoolExecutor(WORKERS)

    def submit(self, candidate):
        from tilesearch.records import BuildResult

        delay = self.seconds.pop(0) if self.seconds else 0.0
        return self.pool.submit(lambda: (time.sleep(delay), BuildResult(candidate, ok=True))[1])

    def close(self) -> None:
        self.pool.shutdown()


def found(path: str, extra: int, seeds: int, strategy: str, compiles: list[list[float]] | None = None,
          patience: float = float("inf")) -> tuple[list[float], list[int]]:
    """The dataset's best latency over each seed's best found, with ``extra`` more in flight (and
    builds taking ``compiles[seed % len]``'s seconds, ``patience`` the tuner's); and each run's
    results recorded past a slow compile (``TuneResult.passed``)."""
    data = dataset.load(path)
    best = data.best().latency_ms
    kept, tuner.DEEPER = (tuner.DEEPER, tuner.PATIENCE), extra
    tuner.PATIENCE = patience
    try:
        shares, passed = [], []
        for seed in range(seeds):
            builder = _Timed(compiles[seed % len(compiles)]) if compiles else _Pool()
            try:
                result = tune(data.op, data.problem, runner=f"replay:{path}", builder=builder, strategy=strategy,
                              trials=48, seed=seed, storage=":memory:", progress=False)
            finally:
                builder.close()
            shares.append(best / min(r.latency_ms for r in result.best if r.latency_ms))
            passed.append(result.passed)
        return shares, passed
    finally:
        tuner.DEEPER, tuner.PATIENCE = kept


def main(argv: list[str]) -> None:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    paths = [a for a in argv if "=" not in a]
    extras = [int(x) for x in opts.get("extra", "0").split(",")]
    seeds, strategy = int(opts.get("seeds", 100)), opts.get("strategy", "tpe")
    print(f"{strategy}, 48 trials, {WORKERS} compile workers, seeds 0-{seeds - 1}: best found / dataset's best")
    if "compile" in opts:
        trials, scale = opts["compile"].rsplit(":", 1)
        compiles = [[s * float(scale) for s in run] for run in recorded_compiles(trials).values()]
        patiences = [float(p) for p in opts.get("patience", "inf,3").split(",")]
        for path in paths:
            got, passed = {}, {}
            for p in patiences:
                got[p], counts = found(path, 0, seeds, strategy, compiles, p * float(scale))
                passed[p] = statistics.mean(counts)
            for p in patiences:
                diff = [a - b for a, b in zip(got[p], got[patiences[0]])]
                print(f"{Path(path).name.split('.')[0][:44]:44s} patience {p:g}: mean {statistics.mean(got[p]):.4f} "
                      f"median {statistics.median(got[p]):.4f}; against patience {patiences[0]:g}, paired: "
                      f"{100 * statistics.mean(diff):+.2f} +- {196 * statistics.stdev(diff) / len(diff) ** 0.5:.2f} "
                      f"points, better in {sum(d > 0 for d in diff)}, worse in {sum(d < 0 for d in diff)}; "
                      f"{passed[p]:.1f} results passed a run", flush=True)
        return
    print(f"{'dataset':44s} {'extra':>5s} {'mean':>7s} {'median':>7s} {'p25':>7s} {'min':>7s} {'>=0.97':>7s}")
    for path in paths:
        for extra in extras:
            start = time.time()
            got = sorted(found(path, extra, seeds, strategy)[0])
            print(f"{Path(path).name.split('.')[0][:44]:44s} {extra:5d} {statistics.mean(got):7.4f} "
                  f"{statistics.median(got):7.4f} {got[len(got) // 4]:7.4f} {got[0]:7.4f} "
                  f"{sum(g >= 0.97 for g in got):4d}/{len(got)}  ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
