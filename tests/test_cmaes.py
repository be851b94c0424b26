"""Optuna's CMA-ES with its finished trials gathered once (``strategy.sampler.FinishedOnceCmaEs``)
proposes what Optuna's own does, trial for trial."""

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from tilesearch.strategy.sampler import FinishedOnceCmaEs

pytest.importorskip("cmaes")

SPACE = {"a": IntDistribution(0, 7), "b": IntDistribution(1, 5), "c": FloatDistribution(-2.0, 2.0),
         "d": CategoricalDistribution(["x", "y"])}


def _proposals(sampler, asks: int, batch: int) -> list[dict]:
    """An ask-and-tell loop as the benchmarks and the tuner run one: a constraint prunes some
    proposals, the rest are told a value; ``batch`` trials are asked before any is told, so
    unfinished trials sit among finished ones."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler)
    seen = []
    while len(seen) < asks:
        trials = [study.ask(SPACE) for _ in range(batch)]
        for trial in trials:
            p = trial.params
            seen.append(p)
            if p["a"] + p["b"] > 9:  # rejected by a constraint
                study.tell(trial, state=TrialState.PRUNED)
            else:
                study.tell(trial, (p["a"] - 3) ** 2 + (p["b"] - 2) ** 2 + p["c"] ** 2 + (p["d"] == "y"))
    return seen


@pytest.mark.parametrize("batch", [1, 3])
def test_proposals_are_optunas_own(batch):
    options = dict(seed=5, with_margin=True, n_startup_trials=4, warn_independent_sampling=False)
    ours = _proposals(FinishedOnceCmaEs(**options), 180, batch)
    assert ours == _proposals(optuna.samplers.CmaEsSampler(**options), 180, batch)
    assert len({tuple(sorted(p.items())) for p in ours}) > 20  # it searched, it did not repeat one point


def test_one_sampler_over_two_studies_proposes_what_optunas_does():
    """Each study's own trials: the second study (another in-memory storage, the same study id 0)
    starts from nothing, not from the first's gathered trials."""
    options = dict(seed=2, with_margin=True, n_startup_trials=4, warn_independent_sampling=False)
    ours, theirs = FinishedOnceCmaEs(**options), optuna.samplers.CmaEsSampler(**options)
    for _ in range(2):
        assert _proposals(ours, 60, 2) == _proposals(theirs, 60, 2)
