"""The polish at the end of a search: the last trials of the budget measure the best
configuration's untried rivals (the op's) and neighbours one step along an ordered knob, once
every search result is in (``TuneSettings.polish``)."""


import pytest

from tilesearch import registry
from tilesearch.space import Categorical, IntRange, Space, config_key
from tilesearch.target import Target
from tilesearch.testing.synthetic import gemm_latency, tune_gemm
from tilesearch.tuner import SettingsError, TuneSettings

TARGET = Target.from_arch("sm_90a", gpu="synthetic")


def _tune(trials, polish, seed=0, strategy="random"):
    op = registry.load("gemm")
    problem = op.problem(m=1024, n=1024, k=1024, dtype="float16")
    result, calls = tune_gemm(problem.to_dict(), strategy=strategy, trials=trials, seed=seed, workers=3, polish=polish)
    space = op.space(problem, TARGET)
    return space, [c.config for c in calls], problem, result


def test_the_last_trials_are_the_searched_best_s_untried_steps():
    space, calls, problem, result = _tune(24, 3)
    assert len(calls) == 24 and len({config_key(c) for c in calls}) == 24
    searched = calls[:21]
    best = min((c for c in searched if gemm_latency(problem.to_dict(), c, TARGET) is not None),
               key=lambda c: gemm_latency(problem.to_dict(), c, TARGET))
    op = registry.load("gemm")
    near = [config_key(c) for c in space.steps(best) + op.rivals(problem.to_dict(), space, best)
            + op.refits(problem.to_dict(), space, TARGET, best, 9)]
    assert all(config_key(c) in near for c in calls[21:])
    assert result.measured_now == 24


def test_without_polish_the_strategy_takes_the_whole_budget():
    _, with_polish, _, _ = _tune(24, 3)
    _, without, _, _ = _tune(24, 0)
    assert without[:21] == with_polish[:21] and without[21:] != with_polish[21:]


def test_steps_move_one_value_along_ordered_knobs_and_to_any_value_of_the_others():
    space = Space([IntRange("stages", 1, 4), Categorical("policy", ("a", "b", "c")), Categorical("width", (64, 96, 128))],
                  [lambda c: "no" if c["stages"] == 1 and c["width"] == 64 else None])
    got = space.steps({"stages": 2, "policy": "a", "width": 64})
    assert got == [{"stages": 3, "policy": "a", "width": 64}, {"stages": 2, "policy": "b", "width": 64},
                   {"stages": 2, "policy": "c", "width": 64}, {"stages": 2, "policy": "a", "width": 96}]


def test_polish_must_not_be_negative():
    with pytest.raises(SettingsError, match="polish must not be negative"):
        TuneSettings(polish=-1)


def test_gemm_rivals_keep_the_bytes_in_flight_or_transpose_the_tile():
    op = registry.load("gemm")
    problem = op.problem(m=4096, n=4096, k=4096, dtype="bfloat16", layout="nt")
    space = op.space(problem, TARGET)
    best = next(c for c in space.enumerate() if c["block_m"] == 128 and c["block_n"] == 256 and c["block_k"] == 64
                and c["num_stages"] == 4 and c["warp_policy"] == "full_row" and not c["persistent"])
    rivals = [c for c in op.rivals(problem.to_dict(), space, best) if space.is_valid(c)]
    moved = [{k for k in c if c[k] != best[k]} for c in rivals]
    assert {"block_k", "num_stages"} in moved and {"block_m", "block_n"} in moved
    for c in rivals:
        if c["block_k"] == best["block_k"] and c["num_stages"] > best["num_stages"]:
            assert space.why_invalid({**c, "num_stages": c["num_stages"] + 1})  # the deepest that fits
        elif "num_stages" in {k for k in c if c[k] != best[k]}:
            assert c["block_k"] * c["num_stages"] == best["block_k"] * best["num_stages"]
        else:
            assert (c["block_m"], c["block_n"]) == (best["block_n"], best["block_m"])


def test_gemm_rivals_go_as_deep_as_shared_memory_holds_at_the_best_s_k_step():
    # a search that ended on 128x144x64 with 4 stages (0.900x cuBLAS) had never timed it 5 deep (0.978x)
    op = registry.load("gemm")
    problem = op.problem(m=512, n=4608, k=3584, dtype="float16", layout="nt")
    space = op.space(problem, TARGET)
    best = {"block_m": 128, "block_n": 144, "block_k": 64, "num_stages": 4, "threads": 256, "panel_size": 4,
            "raster": "row", "warp_policy": "full_row", "split_k": 1, "persistent": False, "epilogue": "smem",
            "tma": True, "warp_specialize": "role_based", "swap_ab": False}
    assert space.why_invalid(best) is None
    deeper = [c for c in op.rivals(problem.to_dict(), space, best) if c == {**best, "num_stages": 5}]
    assert deeper and space.why_invalid(deeper[0]) is None and space.why_invalid({**best, "num_stages": 6})
    # at the deepest pipeline already, no such rival
    assert not [c for c in op.rivals(problem.to_dict(), space, deeper[0])
                if c["block_k"] == 64 and c["num_stages"] > 5 and space.why_invalid(c) is None]


def test_the_chunked_rival_of_a_width_off_its_chunks_takes_the_nearest_width_that_fits():
    # the chunked epilogue stores 64 columns at a time: a 144-wide best gets the program at 192, else 128
    op = registry.load("gemm")
    problem = op.problem(m=8192, n=9216, k=256, dtype="bfloat16", layout="nt")  # short K: the knob is offered
    space = op.space(problem, TARGET)
    best = next(c for c in space.enumerate() if c["block_m"] == 128 and c["block_n"] == 144 and c["persistent"]
                and c["cluster"] == "off" and c["epilogue"] == "smem" and c["warp_policy"] == "full_row")
    first = op.rivals(problem.to_dict(), space, best)[0]
    assert (first["epilogue"], first["cluster"], first["block_n"]) == ("chunked", "single", 192)
    assert space.why_invalid(first) is None
    assert "multiple of" in space.why_invalid({**first, "block_n": 144})


def test_the_polish_measures_the_best_s_rivals_first():
    space, calls, problem, _ = _tune(24, 3)
    op = registry.load("gemm")
    best = min((c for c in calls[:21] if gemm_latency(problem.to_dict(), c, TARGET) is not None),
               key=lambda c: gemm_latency(problem.to_dict(), c, TARGET))
    seen = {config_key(c) for c in calls[:21]}
    rivals = [config_key(c) for c in op.rivals(problem.to_dict(), space, best) if space.is_valid(c) and config_key(c) not in seen]
    polished = [config_key(c) for c in calls[21:]]
    assert rivals, "the test needs a best with an untried rival"
    assert polished[:len(rivals)] == rivals[:3]


def test_the_strategy_s_model_orders_the_polish_s_steps():
    from tilesearch.strategy import RandomStrategy

    class Ranked(RandomStrategy):
        def rank(self, context, configs):
            return [float(c["num_stages"]) for c in configs]  # the most stages first

    space, calls, problem, _ = _tune(48, 6, strategy=Ranked(0))
    op = registry.load("gemm")
    best = min((c for c in calls[:42] if gemm_latency(problem.to_dict(), c, TARGET) is not None),
               key=lambda c: gemm_latency(problem.to_dict(), c, TARGET))
    searched = {config_key(c) for c in calls[:42]}
    rivals = {config_key(c) for c in op.rivals(problem.to_dict(), space, best)}
    rivals |= {config_key(c) for c in op.refits(problem.to_dict(), space, TARGET, best, 9)}  # before the steps
    stepped = [config_key(c) for c in calls[42:] if config_key(c) not in rivals]
    untried = [c for c in space.steps(best) if config_key(c) not in searched | rivals]
    expected = sorted(untried, key=lambda c: -c["num_stages"])  # stable: knob order on ties
    assert len({c["num_stages"] for c in untried}) > 1, "the test needs steps the rank tells apart"
    assert stepped and stepped == [config_key(c) for c in expected][:len(stepped)]


def test_a_grid_gets_no_polish():
    space, calls, _, _ = _tune(24, 3, strategy="grid")
    assert [config_key(c) for c in calls] == [config_key(c) for c in list(space.enumerate())[:24]]


def test_the_polish_measures_the_best_s_untried_refits_after_its_rivals():
    """The best's refits (the same work in tiles that fill the waves) follow its rivals: a search
    that settled on one tile shape may never have timed the swapped tile that fits M."""
    from tilesearch.tuner import POLISH_REFITS

    space, calls, problem, _ = _tune(40, 12)
    op, keys = registry.load("gemm"), [config_key(c) for c in calls]
    # the polish begins once every search result is in, with the best so far's untried rivals
    for start in range(8, len(calls)):
        best = min((c for c in calls[:start] if gemm_latency(problem.to_dict(), c, TARGET) is not None),
                   key=lambda c: gemm_latency(problem.to_dict(), c, TARGET))
        seen = set(keys[:start])
        rivals = [config_key(c) for c in op.rivals(problem.to_dict(), space, best)
                  if space.is_valid(c) and config_key(c) not in seen]
        if rivals and keys[start:start + len(rivals)] == rivals:
            break
    else:
        raise AssertionError("no run of the best's rivals found: the test needs a best with an untried rival")
    refits = [config_key(c) for c in op.refits(problem.to_dict(), space, TARGET, best, 3 * POLISH_REFITS)
              if config_key(c) not in seen][:POLISH_REFITS]
    refits = [r for r in refits if r not in rivals]
    assert refits, "the test needs a best with an untried refit"
    after = start + len(rivals)
    assert len(keys) - after >= 2, "the test needs a budget that reaches the refits"
    assert keys[after:after + len(refits)] == refits[:len(keys) - after]


def test_the_polish_compiles_ahead_while_the_last_search_trials_are_measured(monkeypatch):
    # its kernels are in the compile cache when its trials come, not compiled while the GPU waits
    from tilesearch.builder import NullBuilder

    submitted = []
    submit = NullBuilder.submit
    monkeypatch.setattr(NullBuilder, "submit", lambda self, c: (submitted.append(config_key(c.config)), submit(self, c))[1])
    _, calls, _, _ = _tune(24, 3)
    polish = [config_key(c) for c in calls[21:]]
    assert len(submitted) == 24 + 3  # each trial's build, and the polish's three ahead of it
    ahead = submitted[submitted.index(polish[0]):]
    assert ahead[:3] == polish and ahead[3:] == polish  # before its trials (the best did not change)


@pytest.mark.parametrize("seed", range(6))
def test_the_polish_is_compiled_ahead_again_when_a_last_search_result_is_a_new_best(monkeypatch, seed):
    # whichever of the last search results turns out best, its polish's kernels are compiled
    # before the polish's trials are launched: no trial of the polish waits for its compile
    from tilesearch.builder import NullBuilder

    submitted = []
    submit = NullBuilder.submit
    monkeypatch.setattr(NullBuilder, "submit", lambda self, c: (submitted.append(config_key(c.config)), submit(self, c))[1])
    _, calls, _, _ = _tune(24, 3, seed=seed)
    for key in (config_key(c) for c in calls[21:]):
        assert submitted.count(key) == 2, (seed, key)  # ahead, then as the polish's trial
