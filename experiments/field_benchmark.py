"""Search against the field: tilesearch's strategies, Optuna's samplers and Kernel Tuner's
strategies on the same replay datasets, with the same budgets, seeds and metrics (CPU only;
needs the ``bench`` extra: ``pip install -e .[bench]``).

The replay benchmark mode of the shared experiment runner (:mod:`tilesearch.experiment.field`
documents the method; Kernel Tuner runs in its own simulation mode through
:mod:`tilesearch.experiment.kernel_tuner`). ``tests/test_field_benchmark.py`` asserts the
verdicts on the committed datasets. Writes ``results.md``, ``results.json`` and
``convergence_<dataset>.png`` to ``--out``; prints the summary last.

usage: python experiments/field_benchmark.py --data experiments/data --out experiments/results/field
       [--strategies ...] [--seeds 10] [--caches DIR]
"""

import sys

from tilesearch.experiment.field import DEFAULT, main

# ours (random, tpe, xgb, xgb+transfer), Optuna's CMA-ES (gp on request: more than 7 s of CPU per
# trial on a 2-core machine), every Kernel Tuner strategy, and differential evolution on reversed values
STRATEGIES = DEFAULT

if __name__ == "__main__":
    sys.exit(main(strategies=STRATEGIES))
