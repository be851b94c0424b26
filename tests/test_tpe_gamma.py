"""TPE's good trials are counted over measured ones: configurations a constraint rejected
(recorded as pruned) never fill TPE's good group (tilesearch.strategy.sampler.CompleteGamma)."""

import warnings

import optuna
from optuna.trial import TrialState

from tilesearch.space import Categorical, Space
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
        def trials(self):  # one finished: the sampler knows the knobs and proposes
            return [optuna.trial.create_trial(state=TrialState.COMPLETE, value=1.0)]

    class Context:
        db = Db()
        space = Space([Categorical("a", (1, 2))])

        def ask(self):
            return "proposal"

    Context.db.study = study
    assert strategy.propose(Context(), 2) == ["proposal", "proposal"]
    assert strategy._watch.gamma.complete == 0
    assert sampler.valid({"a": 2}) is True  # told the space too


def test_tpe_proposes_what_the_constraints_accept(monkeypatch):
    """Half of this space breaks its constraint, and the best configuration lies next to it: TPE
    told the space proposes no invalid configuration in its random start or after it, but for the
    very first (no trial yet shows which knobs there are), where Optuna's proposes many."""
    from tilesearch.strategy import sampler as sampler_module

    space = Space([Categorical("a", tuple(range(8))), Categorical("b", tuple(range(8)))],
                  [lambda c: "a above b" if c["a"] > c["b"] else None])

    def invalid_proposals(told):
        monkeypatch.setattr(sampler_module, "validity", validity if told else lambda space: None)
        strategy = tpe(seed=0)
        study = optuna.create_study(sampler=strategy.sampler())

        class Context:
            class db:
                pass

        Context.db.study = study
        Context.space = space
        invalid = 0
        for _ in range(60):
            strategy._watch(Context)
            trial = study.ask(space.distributions())
            config = space.from_params(trial.params)
            if space.why_invalid(config):
                invalid += 1
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                study.tell(trial, abs(config["a"] - 5) + abs(config["b"] - 6))
        return invalid

    validity = sampler_module.validity
    told, plain = invalid_proposals(True), invalid_proposals(False)
    assert told <= 1 and plain >= 15, (told, plain)


def test_tpe_starts_with_valid_configurations_before_any_trial_shows_the_knobs():
    # README's command's first batch (19 proposals, 15 compile workers) came before any trial had
    # finished, so TPE drew each knob on its own: 10 of them were invalid on the H100
    from tilesearch.testing.synthetic import tune_gemm

    result, _ = tune_gemm({"m": 8192, "n": 8192, "k": 8192, "dtype": "float16"}, strategy="tpe", trials=24, seed=1)
    assert result.statuses.get("invalid", 0) <= 1 and result.statuses.get("ok", 0) + result.statuses.get("wrong_result", 0) == 24
