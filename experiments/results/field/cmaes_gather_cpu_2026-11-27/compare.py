"""One CMA-ES run of the field benchmark (seed 3, the 1024^3 dataset, its default budget) with
``FinishedOnceCmaEs`` and then with Optuna's own ``_get_trials``, back to back in one process:
whether the measured rows are the same, and each run's sampler time (``Run.overhead_s``).
Run from the repository root: ``.venv/bin/python experiments/results/field/cmaes_gather_cpu_2026-11-27/compare.py``."""
import math

import optuna

from tilesearch import dataset
from tilesearch.experiment import field as fb
from tilesearch.strategy import sampler

d = next(d for d in dataset.load_dir("experiments/data") if d.name.startswith("gemm_1024x1024x1024"))
kw = dict(horizon=max(20, math.ceil(0.1 * len(d))), cap=math.ceil(0.3 * len(d)))
ours = fb.optuna_run(d, "cmaes", 3, **kw)
sampler.FinishedOnceCmaEs._get_trials = optuna.samplers.CmaEsSampler._get_trials
theirs = fb.optuna_run(d, "cmaes", 3, **kw)
print(f"rows measured: {len(ours.latency_ms)}; the same rows in the same order: {ours.latency_ms == theirs.latency_ms}")
print(f"sampler time: gathered once {ours.overhead_s:.1f} s, Optuna's own {theirs.overhead_s:.1f} s")
