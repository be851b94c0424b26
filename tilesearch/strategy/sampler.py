"""Strategies that are an Optuna sampler: ``tpe`` (and any sampler passed in)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from tilesearch.strategy.base import Proposal, SearchContext, Strategy


class SamplerStrategy(Strategy):
    """Lets an Optuna sampler choose. Configurations it picks that a constraint rejects are
    recorded as pruned (TPE then ranks them with the bad trials, see :class:`CompleteGamma`) and
    cost no compilation."""

    def __init__(self, name: str, make_sampler: Callable[[int], optuna.samplers.BaseSampler], seed: int = 0,
                 watch: Callable[[optuna.Study], None] | None = None) -> None:
        self.name = name
        self.seed = seed
        self._make = make_sampler
        self._watch = watch  # told the study before each batch of proposals (the sampler's gamma counts it)

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._make(self.seed)

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self._watch is not None:
            self._watch(context.db.study)
        return [context.ask() for _ in range(n)]


class CompleteGamma:
    """TPE's split of good trials from bad (Optuna's default: a tenth of them, at most 25),
    counted over the study's complete trials only.

    TPE counts pruned trials too, and fills its good group with them whenever fewer complete
    trials than that exist. Our pruned trials are the configurations a constraint rejected, so a
    search whose first random draws were mostly invalid took those as good and went on proposing
    invalid ones: the README's 8192^3 TPE command on an H100 made 207 invalid proposals and
    measured its first trial after 33.6 s (19 and 15.6 s in a run whose first draws were luckier),
    and chose a kernel 4% slower. Counted over complete trials, the good group holds measured
    configurations only and every rejected one ranks with the bad.

    The complete trials are counted once per batch of proposals (:meth:`watch`), not at every
    ask: TPE already reads the whole study at each ask, and no trial of the batch completes
    before the batch is proposed."""

    def __init__(self) -> None:
        self.complete: int | None = None

    def watch(self, study: optuna.Study) -> None:
        self.complete = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def __call__(self, n: int) -> int:
        return min(math.ceil(0.1 * (n if self.complete is None else self.complete)), 25)


def tpe(seed: int = 0) -> SamplerStrategy:
    """Optuna's TPE, multivariate, with a constant liar so that trials in flight steer it away,
    its good trials counted over measured ones (:class:`CompleteGamma`)."""
    gamma = CompleteGamma()

    def make(s: int) -> optuna.samplers.TPESampler:
        with warnings.catch_warnings():  # Optuna 4.9 marks gamma for removal in 6.0: then the default split
            warnings.simplefilter("ignore", FutureWarning)
            try:
                return optuna.samplers.TPESampler(seed=s, multivariate=True, group=False, constant_liar=True,
                                                  n_startup_trials=10, gamma=gamma)
            except TypeError:
                return optuna.samplers.TPESampler(seed=s, multivariate=True, group=False, constant_liar=True,
                                                  n_startup_trials=10)

    return SamplerStrategy("tpe", make, seed, watch=gamma.watch)


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
