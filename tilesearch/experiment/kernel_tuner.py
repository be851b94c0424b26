"""Kernel Tuner's strategies on a replay dataset, in Kernel Tuner's own simulation mode.

A dataset is exported to a Kernel Tuner cache file (:func:`export`), and
``kernel_tuner.tune_kernel(..., cache=FILE, simulation_mode=True)`` then runs a strategy on it
with no GPU and no kernel source: Kernel Tuner's simulation runner answers every configuration
from the cache. How the two tuners' counts line up (read from ``kernel_tuner/runners/simulation.py``
and ``strategies/common.py`` of kernel-tuner 1.5.0):

- Budget: ``strategy_options["max_fevals"]`` counts *unique* configurations served from the
  cache (a strategy that revisits one gets it again at no cost, with its compile and benchmark
  times zeroed), as ``trials`` counts distinct configurations measured in tilesearch. A run is
  read back as its unique configurations in first-visit order (:func:`run`).
- Failures: a row that failed (compile error, timeout, wrong result) is in the cache as
  ``CompilationFailedConfig`` or ``RuntimeFailedConfig``; serving it counts against the budget,
  as a failed trial counts in tilesearch.
- Space: the search space is exactly the dataset's rows (a restriction that accepts the rows'
  configurations, failed ones included), as tilesearch's space restricted to the dataset is.
  A configuration outside it is an ``InvalidConfig`` that costs no evaluation, as a pruned
  trial costs no compilation. (``kernel_tuner.tune_cache`` would drop the failed rows from the
  space, which would make the task easier than it is for tilesearch's strategies.)
- Values: integer knobs keep their values; other knobs (strings, booleans) are given as the
  index of their value, since Kernel Tuner's snapping to the nearest value needs numbers.
- Seeds: Kernel Tuner 1.5.0 takes no seed for these strategies; they draw from Python's
  ``random`` and NumPy's global generator, so :func:`run` seeds both. Its Bayesian optimisation
  and its search space's Latin-hypercube sample (differential evolution's first population)
  draw from unseeded SciPy generators, which :func:`run` seeds from NumPy's global one, so that
  every run is reproducible.
- Order: differential evolution's first population is a Latin-hypercube sample that Kernel
  Tuner 1.5.0 passes through a ``set`` (``Searchspace.get_LHS_sample_indices``), which puts it in
  the order of the search space's enumeration; the configurations it measures first are
  therefore the first ones of that enumeration, whatever the seed. ``export(reverse=True)``
  lists every knob's values in reverse, which shows how much a strategy owes to that order.
- Times: the cache carries each row's ``compile_s`` as ``compile_time`` and ``measure_s`` as
  ``benchmark_time`` (milliseconds), and :func:`run` measures Kernel Tuner's own time (its
  strategy and framework), which the Willemsen score adds as tilesearch's strategy time is.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilesearch import dataset

# Kernel Tuner strategy names and the options given to them (beyond max_fevals)
STRATEGIES: dict[str, dict[str, Any]] = {
    "dual_annealing": {},
    "genetic_algorithm": {},
    "basinhopping": {},
    "pso": {},
    "simulated_annealing": {},
    "firefly_algorithm": {},
    "diff_evo": {},
    "greedy_ils": {},
    "mls": {},
    "bayes_opt": {},
    "random_sample": {"fraction": 1.0},  # the budget, not a share of the space, ends it
}
PREFIX = "kt:"
REVERSED = "/reversed"  # suffix: the same strategy on the values listed in reverse
_FAILED = {"compile_error": "CompilationFailedConfig", "compile_timeout": "CompilationFailedConfig"}


@dataclass(frozen=True)
class Cache:
    """A dataset exported to a Kernel Tuner cache file, and how to read its values back."""

    path: Path
    kernel_name: str
    problem_size: tuple[int, ...]
    tune_params: dict[str, list[Any]]
    encode: dict[str, dict[Any, Any]]  # knob -> our value -> Kernel Tuner's value
    rows: dict[tuple, dataset.Row]  # Kernel Tuner's values -> the dataset's row

    def restriction(self) -> Any:
        """A python-constraint restriction that accepts exactly the dataset's configurations."""
        from constraint import FunctionConstraint

        allowed = frozenset(self.rows)
        return FunctionConstraint(lambda *values: tuple(values) in allowed)


def _encoding(values: list[Any], reverse: bool) -> dict[Any, Any]:
    numeric = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    ordered = list(reversed(values)) if reverse else list(values)
    return {v: (v if numeric else i) for i, v in enumerate(ordered)}


def export(data: dataset.Dataset, path: str | Path, *, reverse: bool = False) -> Cache:
    """Writes ``data`` as a Kernel Tuner cache file (``device_name``, ``kernel_name``,
    ``problem_size``, ``tune_params_keys``, ``tune_params``, ``objective`` and ``cache``: one
    entry per row, keyed by its comma-joined values, with ``time`` in ms or the failure's class
    name). ``reverse`` lists each knob's values in reverse order."""
    names = list(data.knobs)
    encode = {k: _encoding(v, reverse) for k, v in data.knobs.items()}
    tune_params = {k: list(encode[k].values()) for k in names}
    problem_size = tuple(v for v in data.problem.values() if isinstance(v, int) and not isinstance(v, bool))
    entries, rows = {}, {}
    for row in data.rows:
        values = tuple(encode[k][row.config[k]] for k in names)
        rows[values] = row
        timings = {"compile_time": 1e3 * (row.compile_s or 0.0), "verification_time": 0.0,
                   "benchmark_time": 1e3 * (row.measure_s or 0.0)}
        if row.ok:
            outcome: dict[str, Any] = {"time": row.latency_ms, "times": [row.latency_ms]}
        else:
            outcome = {"time": _FAILED.get(row.status, "RuntimeFailedConfig")}
        entries[",".join(map(str, values))] = {**dict(zip(names, values)), **outcome, **timings,
                                               "strategy_time": 0.0, "framework_time": 0.0}
    header = {"device_name": data.meta.get("gpu", "gpu"), "kernel_name": data.name,
              "problem_size": list(problem_size), "tune_params_keys": names, "tune_params": tune_params,
              "objective": "time", "cache": entries}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # written aside and renamed: the field benchmark's processes may export one dataset at once, and a
    # Kernel Tuner run in another must read a whole file
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(json.dumps(header))
    os.replace(aside, path)
    return Cache(path, data.name, problem_size, tune_params, encode, rows)


@contextlib.contextmanager
def _seeded(seed: int):
    """Seeds the generators Kernel Tuner's strategies draw from (see the module docstring)."""
    from kernel_tuner.strategies import bayes_opt
    from scipy.stats import qmc

    random.seed(seed)
    np.random.seed(seed)
    original = qmc.LatinHypercube

    def seeded(d: int, **kw: Any) -> Any:
        return original(d=d, rng=np.random.randint(2**31), **kw)

    bayes_opt.LatinHypercube = qmc.LatinHypercube = seeded  # bayes_opt imported the name; searchspace imports it late
    try:
        yield
    finally:
        bayes_opt.LatinHypercube = qmc.LatinHypercube = original


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raises :class:`TimeoutError` in the main thread after ``seconds`` (elsewhere: no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(*_: Any) -> None:
        raise TimeoutError(f"no result within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# A run's time limit: on a sparse sample of the full GEMM space Kernel Tuner 1.5.0's greedy_ils
# ran for over 6 minutes at 6 GB without ending one run (where its other runs took a second)
TIME_LIMIT_S = 120.0


def run(cache: Cache, strategy: str, seed: int, *, max_fevals: int,
        options: Mapping[str, Any] | None = None, time_limit: float | None = TIME_LIMIT_S) -> tuple[list[dataset.Row], float]:
    """Runs Kernel Tuner's ``strategy`` on ``cache`` in simulation mode; returns the dataset's
    rows in the order the strategy first evaluated them, and the seconds Kernel Tuner took.
    Raises :class:`TimeoutError` after ``time_limit`` seconds (in the main thread)."""
    import kernel_tuner

    opts = {**STRATEGIES.get(strategy, {}), **(options or {}), "max_fevals": max_fevals}
    names = list(cache.tune_params)
    with _time_limit(time_limit), _seeded(seed), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        results, _ = kernel_tuner.tune_kernel(
            cache.kernel_name, "", cache.problem_size, [], cache.tune_params,
            restrictions=[cache.restriction()], strategy=strategy, strategy_options=opts,
            cache=str(cache.path), simulation_mode=True, quiet=True, objective="time",
            objective_higher_is_better=False, seed=seed,
        )
        seconds = time.perf_counter() - start
    order: dict[tuple, dataset.Row] = {}
    for result in results:
        values = tuple(result[k] for k in names)
        if values not in order and values in cache.rows:
            order[values] = cache.rows[values]
    return list(order.values()), seconds
