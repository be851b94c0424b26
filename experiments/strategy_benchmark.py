"""Strategy benchmark on replay datasets: how many trials, and how much tuning time, each strategy
needs to find a fast configuration (CPU only, a few minutes).

The replay benchmark mode of the shared experiment runner
(:mod:`tilesearch.experiment.strategies`, which documents the method and every option): each
strategy runs the real tuning loop on each recorded dataset, once per seed; reported are trials
to 97% and 99% of the dataset's best, the Willemsen score, and whether issue 3's targets hold
(``tests/test_strategy_benchmark.py`` asserts them on the committed datasets). Writes
``results.md``, ``results.json`` and ``convergence_<dataset>.png`` to ``--out``.

usage: python experiments/strategy_benchmark.py --data experiments/data --out experiments/results/strategies
       [--strategies grid,random,tpe,xgb,xgb+transfer] [--seeds 10] [--transfer-from all] [--synthetic]
"""

import sys

from tilesearch.experiment.strategies import STRATEGIES, main

# grid, random, tpe, xgb, xgb+transfer; NAME+carver and Optuna's gp and cmaes also run on request

if __name__ == "__main__":
    sys.exit(main(strategies=STRATEGIES))
