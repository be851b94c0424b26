"""TPE's good trials are counted over measured ones: configurations a constraint rejected
(recorded as pruned) never fill TPE's good group (tilesearch.strategy.sampler.CompleteGamma)."""

import warnings

import optuna
from optuna.trial import TrialState

from tilesearch.strategy.sampler import CompleteGamma, tpe


def test_the_good_group_is_a_tenth_of_the_complete_trials_not_of_the_pruned_ones():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    for i in range(3):
        study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=float(i)))
    for _ in range(30):
        study.add_trial(optuna.trial.create_trial(params={}, distributions={}, state=TrialState.PRUNED))
    gamma = CompleteGamma()
    assert gamma(33) == 4  # Optuna's default split of 33 trials: 4 good, so one pruned one among them
    gamma.watch(study)
    assert gamma(33) == 1  # of 3 complete ones: 1, a measured one
    for i in range(300):
        study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=float(i)))
    gamma.watch(study)  # counted again at the next batch of proposals
    assert gamma(333) == 25  # at most 25, as Optuna's


def test_tpe_is_made_without_a_warning_and_told_the_study_before_it_proposes():
    strategy = tpe(seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler = strategy.sampler()
    assert isinstance(sampler, optuna.samplers.TPESampler)
    study = optuna.create_study(sampler=sampler)

    class Db:
        pass

    class Context:
        db = Db()

        def ask(self):
            return "proposal"

    Context.db.study = study
    assert strategy.propose(Context(), 2) == ["proposal", "proposal"]
    assert strategy._watch.__self__.complete == 0
