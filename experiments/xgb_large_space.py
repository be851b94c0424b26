"""The ``xgb`` strategy on the full GEMM knob space (split-K, persistent, epilogue, TMA, warp
specialisation: tens of thousands of valid configurations): how long one proposal round takes
and how close to the space's best it gets, on made-up latencies.

Usage (CPU only, about a minute a problem)::

    python experiments/xgb_large_space.py --trials 64 --seeds 3

For each problem and seed it runs the real tuning loop (in-memory study, no compilation) with
the synthetic GEMM runner (:func:`tilesearch.testing.synthetic.gemm_latency`: made-up figures,
never measurements), times every ``propose`` call, and reports per problem: the valid
configurations, the proposal round's median and slowest time (XGBoost imported beforehand: the
first training round of a process would otherwise include that one-off import), trials to 97% of the space's
best (the best of every valid configuration under the same formula) and the best reached.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from typing import Any

from tilesearch import registry, tune
from tilesearch.builder import NullBuilder
from tilesearch.experiment.replay_runs import Timed
from tilesearch.strategy import XGBStrategy
from tilesearch.target import Target
from tilesearch.testing.synthetic import SyntheticRunner, gemm_latency

PROBLEMS = ("1024x1024x1024", "8192x8192x8192", "4096x14336x4096:nt")


def problem_of(text: str) -> dict[str, Any]:
    shape, _, layout = text.partition(":")
    m, n, k = (int(v) for v in shape.split("x"))
    return {"m": m, "n": n, "k": k, "dtype": "float16", "layout": layout or "nn"}


def run(text: str, seed: int, trials: int, batch: int, **options: Any) -> dict[str, Any]:
    """One tuning run of ``xgb`` (``options`` go to :class:`XGBStrategy`) on problem ``text``."""
    op = registry.load("gemm")
    target = Target.from_arch("sm_90a", gpu="synthetic")
    problem = op.problem(**problem_of(text))
    space = op.space(problem, target)
    params = problem.to_dict()
    latencies = [ms for c in space.enumerate() if (ms := gemm_latency(params, c, target)) is not None]
    best = min(latencies)
    strategy = Timed(XGBStrategy(seed, auto_transfer=False, **options))
    runner = SyntheticRunner(lambda c: gemm_latency(params, c, target), target=target)
    builder = NullBuilder()
    builder.workers = batch - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune("gemm", problem, strategy=strategy, runner=runner, builder=builder, storage=":memory:", trials=trials,
             seed=seed, progress=False)
    found = [ms for c in runner.calls if (ms := gemm_latency(params, c.config, target)) is not None]
    to97 = next((i for i, ms in enumerate(found, 1) if ms <= best / 0.97), None)
    return {"valid": len(latencies), "rounds": strategy.rounds, "to97": to97, "best": best / min(found)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="MxNxK[:layout],...")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4, help="proposals per round")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    import xgboost  # noqa: F401  # imported by the first training round otherwise, which would time it

    print(f"importing XGBoost (once per process, left out of the rounds): {time.perf_counter() - start:.1f} s")
    print("SYNTHETIC latencies (tilesearch.testing.synthetic.gemm_latency), not measurements")
    print("| problem | valid configs | round median s | round max s | trials to 97% (per seed) | best reached |")
    print("|---|---|---|---|---|---|")
    for text in filter(None, args.problems.split(",")):
        results = [run(text, seed, args.trials, args.batch) for seed in range(args.seeds)]
        rounds = [r for res in results for r in res["rounds"]]
        print(f"| {text} | {results[0]['valid']} | {statistics.median(rounds):.3f} | {max(rounds):.3f} | "
              f"{', '.join(str(r['to97'] or f'>{args.trials}') for r in results)} | "
              f"{', '.join(format(r['best'], '.1%') for r in results)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
