"""Strategies that are an Optuna sampler: ``tpe`` (and any sampler passed in)."""

from __future__ import annotations

from collections.abc import Callable

import optuna

from tilesearch.strategy.base import Proposal, SearchContext, Strategy


class SamplerStrategy(Strategy):
    """Lets an Optuna sampler choose. Configurations it picks that a constraint rejects are
    recorded as pruned (TPE then ranks them with the bad trials) and cost no compilation."""

    def __init__(self, name: str, make_sampler: Callable[[int], optuna.samplers.BaseSampler], seed: int = 0) -> None:
        self.name = name
        self.seed = seed
        self._make = make_sampler

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._make(self.seed)

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        return [context.ask() for _ in range(n)]


def tpe(seed: int = 0) -> SamplerStrategy:
    """Optuna's TPE, multivariate, with a constant liar so that trials in flight steer it away."""
    return SamplerStrategy(
        "tpe",
        lambda s: optuna.samplers.TPESampler(
            seed=s, multivariate=True, group=False, constant_liar=True, n_startup_trials=10
        ),
        seed,
    )


def gp(seed: int = 0) -> SamplerStrategy:
    """Optuna's Gaussian-process sampler (log expected improvement; categorical knobs through a
    Hamming-type kernel). Not in the registry: it is compared with ``xgb`` by
    ``experiments/field_benchmark.py``, and its fitting time grows with the trials."""
    return SamplerStrategy(
        "gp", lambda s: optuna.samplers.GPSampler(seed=s, n_startup_trials=10, deterministic_objective=True), seed
    )


def cmaes(seed: int = 0) -> SamplerStrategy:
    """Optuna's CMA-ES with margin (for integer knobs: ``PowerOfTwo`` knobs are searched over
    their exponent). CMA-ES has no model of categorical knobs: Optuna draws those at random
    (independent sampling), which is what this comparison measures too. Needs the ``cmaes``
    package (the ``bench`` extra)."""
    return SamplerStrategy(
        "cmaes",
        lambda s: optuna.samplers.CmaEsSampler(
            seed=s, with_margin=True, n_startup_trials=10, warn_independent_sampling=False
        ),
        seed,
    )
