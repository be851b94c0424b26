import itertools
import random

import optuna
import pytest

from search_spaces.gemm import GemmOp, smem_bytes
from tilesearch.space import Categorical, IntRange, PowerOfTwo, Space, config_key
from tilesearch.target import Target


def small_space():
    def budget(c):
        return "too big: a*b > 256" if c["a"] * c["b"] > 256 else None

    return Space([PowerOfTwo("a", 4, 64), PowerOfTwo("b", 4, 64), IntRange("s", 1, 3), Categorical("p", ("x", "y"))], [budget])


def test_knob_values():
    assert PowerOfTwo("a", 16, 256).values() == (16, 32, 64, 128, 256)
    assert IntRange("s", 2, 8, 3).values() == (2, 5, 8)
    assert Categorical("p", ("x", "y")).values() == ("x", "y")
    with pytest.raises(ValueError):
        PowerOfTwo("a", 3, 8)
    with pytest.raises(ValueError):
        IntRange("s", 1, 4, 2)


def test_enumeration_matches_brute_force():
    space = small_space()
    brute = [
        dict(a=a, b=b, s=s, p=p)
        for a, b, s, p in itertools.product((4, 8, 16, 32, 64), (4, 8, 16, 32, 64), (1, 2, 3), ("x", "y"))
        if a * b <= 256
    ]
    assert space.size == 150
    assert list(space.enumerate()) == brute
    assert space.count_valid() == len(brute) == 90
    assert space.pruned() == {"too big": 60}


def test_why_invalid_names_the_problem():
    space = small_space()
    assert space.why_invalid(dict(a=64, b=64, s=1, p="x")) == "too big: a*b > 256"
    assert "not in" in space.why_invalid(dict(a=5, b=4, s=1, p="x"))
    assert "missing" in space.why_invalid(dict(a=4, b=4, s=1))
    assert "unknown" in space.why_invalid(dict(a=4, b=4, s=1, p="x", q=1))


def test_sampling_is_valid_and_seeded():
    space = small_space()
    a = [space.sample(random.Random(5)) for _ in range(3)]
    b = [space.sample(random.Random(5)) for _ in range(3)]
    assert a == b
    rng = random.Random(0)
    assert all(space.is_valid(space.sample(rng)) for _ in range(200))


def test_optuna_round_trip_for_every_config():
    space = small_space()
    dists = space.distributions()
    assert isinstance(dists["a"], optuna.distributions.IntDistribution)
    for config in space.enumerate():
        params = space.to_params(config)
        for name, value in params.items():
            assert dists[name]._contains(dists[name].to_internal_repr(value))
        assert space.from_params(params) == config


def test_config_key_is_order_independent():
    assert config_key({"a": 1, "b": 2}) == config_key({"b": 2, "a": 1})


def test_gemm_space_prunes_by_shared_memory_and_registers():
    op = GemmOp()
    problem = op.problem(m=4096, n=4096, k=4096)
    space = op.space(problem, Target.from_arch("sm_90a"))
    big = dict(block_m=256, block_n=256, block_k=128, num_stages=5, threads=256, panel_size=8, warp_policy="square",
               **GemmOp.defaults)
    assert smem_bytes(big, "float16") == 5 * (256 * 128 * 2) * 2
    assert space.why_invalid(big).startswith("shared memory")
    regs = dict(block_m=256, block_n=256, block_k=32, num_stages=2, threads=128, panel_size=0, warp_policy="square",
                **GemmOp.defaults)
    assert space.why_invalid(regs).startswith("registers")
    valid = list(space.enumerate())
    assert all(smem_bytes(c, "float16") <= 232_448 for c in valid)
    assert 0 < len(valid) < space.size
    # a smaller shared memory limit prunes more
    small = op.space(problem, Target.from_arch("sm_86"))
    assert small.count_valid() < len(valid)


def test_neighbours_differ_in_one_knob_and_are_valid():
    space = Space([PowerOfTwo("a", 1, 4), Categorical("b", ("x", "y"))],
                  [lambda c: "a=4 with y" if c["a"] == 4 and c["b"] == "y" else None])
    assert space.neighbours({"a": 1, "b": "y"}) == [{"a": 2, "b": "y"}, {"a": 1, "b": "x"}]
    assert space.neighbours({"a": 4, "b": "x"}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]


def test_a_keyed_space_is_listed_once_a_process_and_its_configurations_are_the_readers_own(monkeypatch):
    from tilesearch import walk
    from tilesearch.op import Problem

    walks = []
    real = walk.positions
    monkeypatch.setattr(walk, "positions", lambda *a: walks.append(1) or real(*a))
    problem = Problem("gemm", {"m": 3000, "n": 512, "k": 256, "dtype": "float16", "layout": "nn"})
    target = Target.from_arch("sm_90a")
    first = GemmOp().space(problem, target)
    listed = list(first.enumerate())
    listed[0]["block_m"] = -1  # a reader's change stays its own
    again = GemmOp().space(problem, target)  # another object, as each tune() asks the op anew
    assert list(again.enumerate()) == [c for c in first.enumerate()] != listed and len(walks) == 1
    assert again.listing()[0]["block_m"] != -1 and len(again.listing()) == again.count_valid() == len(listed)
    # no key, or the knobs narrowed: listed for itself
    assert list(Space(first.knobs, first.constraints).enumerate()) == list(first.enumerate()) and len(walks) == 2
    narrowed = Space([k if k.name != "block_k" else PowerOfTwo("block_k", 32, 64) for k in first.knobs],
                     first.constraints, key=(problem, target))
    assert list(narrowed.enumerate()) == [c for c in first.enumerate() if c["block_k"] <= 64] and len(walks) == 3
    # constraints replaced after a listing: listed anew, and not kept for the key
    first.constraints = (lambda c: "no" if c["block_m"] == 64 else None,)
    assert 64 not in {c["block_m"] for c in first.enumerate()} and len(walks) == 4
    assert 64 in {c["block_m"] for c in GemmOp().space(problem, target).enumerate()} and len(walks) == 4


def test_a_shuffled_listing_is_the_listing_shuffled_as_a_list():
    listing = small_space().listing()
    configs = list(listing)
    random.Random(3).shuffle(configs)
    shuffled = listing.shuffled(random.Random(3))
    assert list(shuffled) == configs and len(shuffled) == len(listing) and list(shuffled[2:5]) == configs[2:5]
    assert list(listing) == list(small_space().enumerate())  # the listing itself is left in order


def test_a_large_space_is_drawn_from_in_a_seeded_order_without_a_listing(monkeypatch):
    from itertools import islice

    from tilesearch import walk
    from tilesearch.space import DRAWN_FROM

    space = GemmOp().space(GemmOp().problem(m=7, n=1536, k=2048, layout="nt"), Target.from_arch("sm_90a"))
    assert space.size >= DRAWN_FROM
    monkeypatch.setattr(walk, "positions", lambda *a: pytest.fail("a random order listed the space"))
    first = list(islice(space.shuffled(random.Random(5)), 200))
    assert first == list(islice(space.shuffled(random.Random(5)), 200)) != list(islice(space.shuffled(random.Random(6)), 200))
    assert len({config_key(c) for c in first}) == 200 and all(space.why_invalid(c) is None for c in first)


def test_a_sparse_large_space_is_drawn_from_then_listed_each_configuration_once(monkeypatch):
    from tilesearch import walk
    from tilesearch.space import DRAWN_FROM

    knobs = [IntRange("a", 0, 1023), IntRange("b", 0, 1023)]
    space = Space(knobs, [lambda c: None if c["a"] % 32 == 0 and c["b"] % 32 == 0 else "sparse"])
    assert space.size >= DRAWN_FROM  # 1 in 1024 valid: a few drawn, then 2000 misses in a row, then listed
    walks, real = [], walk.positions
    monkeypatch.setattr(walk, "positions", lambda *a: walks.append(1) or real(*a))
    order = list(space.shuffled(random.Random(1)))
    assert sorted(order, key=lambda c: (c["a"], c["b"])) == list(space.enumerate()) and len(order) == 1024
    assert order == list(space.shuffled(random.Random(1))) and len(walks) == 1
