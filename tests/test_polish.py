"""The polish at the end of a search: the last trials of the budget measure the best
configuration's untried neighbours one step along an ordered knob, once every search result is
in (``TuneSettings.polish``)."""

import warnings

import pytest

from tilesearch import registry, tune
from tilesearch.builder import NullBuilder
from tilesearch.space import Categorical, IntRange, Space, config_key
from tilesearch.target import Target
from tilesearch.testing.synthetic import SyntheticRunner, gemm_latency
from tilesearch.tuner import SettingsError, TuneSettings

TARGET = Target.from_arch("sm_90a", gpu="synthetic")


def _tune(trials, polish, seed=0):
    op = registry.load("gemm")
    problem = op.problem(m=1024, n=1024, k=1024, dtype="float16")
    runner = SyntheticRunner(lambda c: gemm_latency(problem.to_dict(), c, TARGET), target=TARGET)
    builder = NullBuilder()
    builder.workers = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune("gemm", problem, strategy="random", runner=runner, builder=builder, storage=":memory:",
                      trials=trials, seed=seed, polish=polish, progress=False, retime=0)
    space = op.space(problem, TARGET)
    return space, [c.config for c in runner.calls], problem, result


def test_the_last_trials_are_the_searched_best_s_untried_steps():
    space, calls, problem, result = _tune(24, 3)
    assert len(calls) == 24 and len({config_key(c) for c in calls}) == 24
    searched = calls[:21]
    best = min((c for c in searched if gemm_latency(problem.to_dict(), c, TARGET) is not None),
               key=lambda c: gemm_latency(problem.to_dict(), c, TARGET))
    steps = [config_key(c) for c in space.steps(best)]
    assert all(config_key(c) in steps for c in calls[21:])
    assert result.measured_now == 24


def test_without_polish_the_strategy_takes_the_whole_budget():
    _, with_polish, _, _ = _tune(24, 3)
    _, without, _, _ = _tune(24, 0)
    assert without[:21] == with_polish[:21] and without[21:] != with_polish[21:]


def test_steps_move_one_value_along_the_ordered_knobs_only():
    space = Space([IntRange("stages", 1, 4), Categorical("policy", ("a", "b")), Categorical("width", (64, 96, 128))],
                  [lambda c: "no" if c["stages"] == 1 and c["width"] == 64 else None])
    got = space.steps({"stages": 2, "policy": "a", "width": 64})
    assert got == [{"stages": 3, "policy": "a", "width": 64}, {"stages": 2, "policy": "a", "width": 96}]


def test_polish_must_not_be_negative():
    with pytest.raises(SettingsError, match="polish must not be negative"):
        TuneSettings(polish=-1)
