"""Listing a space by walking its knobs (tilesearch.walk) gives exactly the configurations, in
exactly the order, that checking each configuration of the product gives."""

import os
import subprocess
import sys

import pytest

from tilesearch.registry import load
from tilesearch.space import Categorical, IntRange, PowerOfTwo, Space
from tilesearch.target import Target
from tilesearch.walk import Partial, Undecided, valid, walk_order


def filtered(space):
    return [c for c in space.enumerate(valid_only=False) if space.why_invalid(c) is None]


def awkward_space():
    """Constraints of the kinds the operators write: branches that read different knobs, a default
    for a knob the space lacks, membership, a whole-configuration view, a caught exception, and a
    constraint that raises on a few configurations the others have already rejected."""

    def branchy(c):
        if c["swap"]:
            return "swap: a multiple of 32 rows" if c["rows"] % 32 else None
        return "rows: 64 or more unswapped" if c["rows"] < 64 else None

    def absent(c):
        return "cluster off with 4 stages" if c.get("cluster", "off") == "off" and c["stages"] == 4 else None

    def member(c):
        return "mode b needs cols 16" if "mode" in c and c["mode"] == "b" and c["cols"] != 16 else None

    def whole(c):
        return "all zero" if sum(v for v in dict(c).values() if isinstance(v, int)) == 0 else None

    def careful(c):
        try:
            return "wide" if c["cols"] * c["stages"] > 48 else None
        except Exception:  # noqa: BLE001 - the walk's Undecided must not land here
            return "caught"

    def fragile(c):
        return "odd" if 1 / (c["stages"] - 3) < 0 else None  # divides by zero where stages == 3

    def first(c):
        return "three stages" if c["stages"] == 3 else None

    knobs = [PowerOfTwo("rows", 16, 256), Categorical("cols", (8, 16, 24)), IntRange("stages", 1, 5),
             Categorical("mode", ("a", "b")), Categorical("swap", (False, True))]
    return Space(knobs, [branchy, absent, member, first, whole, careful, fragile])


def test_a_walk_lists_what_a_filter_lists_in_the_same_order():
    space = awkward_space()
    found = list(space.enumerate())
    assert found == filtered(space) and [list(c) for c in found] == [list(c) for c in filtered(space)]
    assert 0 < len(found) < space.size


def test_a_constraint_that_raises_on_a_valid_configuration_still_raises():
    def broken(c):
        return None if c["a"] < 3 else 1 / 0

    space = Space([IntRange("a", 1, 4), IntRange("b", 1, 2)], [broken])
    with pytest.raises(ZeroDivisionError):
        list(space.enumerate())


def test_a_partial_configuration_stops_a_constraint_at_a_knob_not_yet_assigned():
    partial = Partial({"a": 1}, frozenset({"a", "b"}))
    assert partial["a"] == 1 and partial.get("a") == 1 and partial.get("zzz", 7) == 7
    assert "b" in partial and "zzz" not in partial
    for read in (lambda: partial["b"], lambda: partial.get("b", 0), lambda: dict(partial)):
        with pytest.raises(Undecided):
            read()
    with pytest.raises(KeyError):
        partial["zzz"]


def test_a_stopped_constraint_runs_again_only_once_the_knob_it_stopped_at_is_assigned():
    walked = []

    def on_z(c):
        if isinstance(c, Partial | dict):  # the walk's calls, not walk_order's draws
            walked.append(1)
        return "z is 3" if c["z"] == 3 else None

    def x_and_y(c):
        return "x + y is 5" if c["x"] + c["y"] == 5 else None

    names, values = ("x", "y", "z"), ((1, 2, 3), (1, 2, 3, 4), (1, 2, 3))
    assert [names[i] for i in walk_order(names, values, [x_and_y, on_z])] == ["x", "y", "z"]
    found = valid(names, values, [x_and_y, on_z])
    assert found == [{"x": x, "y": y, "z": z} for x in (1, 2, 3) for y in (1, 2, 3, 4) for z in (1, 2) if x + y != 5]
    # stopped at z once x is assigned, then run only on whole configurations, not again with y assigned
    assert len(walked) == 3 + sum(3 for x in (1, 2, 3) for y in (1, 2, 3, 4) if x + y != 5)


def test_the_knobs_most_constraints_read_are_walked_first():
    names, values = ("x", "y", "z"), ((1, 2), (1, 2), (1, 2))
    order = walk_order(names, values, [lambda c: c["z"] > 1 and None, lambda c: c["z"] + c["y"] and None])
    assert [names[i] for i in order] == ["z", "y", "x"]
    assert valid((), (), []) == []


@pytest.mark.parametrize("op, params", [
    ("gemm", dict(m=255, n=1024, k=2048, layout="nt")),  # small M: 3.1 million configurations
    ("gemm", dict(m=784, n=4096, k=4096, dtype="bfloat16", layout="nt")),  # swapped heights sized to M
    ("gemm", dict(m=8192, n=8192, k=8192, dtype="float16")),
    ("einsum_sum", dict(t=100, k=77, h=3, d=64, out_dtype="bfloat16")),
    ("grouped_gemm", dict(experts=8, tokens=4096, n=1024, k=2048)),  # an out-of-tree plugin's constraints
])
def test_an_operators_space_walks_to_the_filtered_list(op, params):
    operator = load(op)
    space = operator.space(operator.problem(**params), Target.from_arch("sm_90a"))
    # walked here, not read from a listing another test kept (Space.listing)
    walked = valid(space.names, [space[n].values() for n in space.names], space.constraints)
    assert walked == filtered(space) == list(space.enumerate())


def test_with_the_cluster_and_stream_k_knobs_too():
    # the knobs are in the space only under their environment variables, read at import
    code = ("import random\n"
            "from tilesearch.registry import load; from tilesearch.target import Target\n"
            "op = load('gemm'); space = op.space(op.problem(m=2657, n=6144, k=4096, layout='nt'), Target.from_arch('sm_90a'))\n"
            "assert 'cluster' in space.names and 'stream_k' in space.names and space.size > 10_000_000\n"
            "listed = list(space.enumerate())\n"
            "keys = {tuple(c.values()) for c in listed}\n"
            "rng = random.Random(0)\n"
            "drawn = [space.draw(rng) for _ in range(20000)] + [space.sample(rng) for _ in range(200)]\n"
            "assert all((tuple(c.values()) in keys) == (space.why_invalid(c) is None) for c in drawn)\n"
            "assert all(space.why_invalid(c) is None for c in listed[::50])\n"
            "assert listed == sorted(listed, key=lambda c: [space[n].values().index(c[n]) for n in space.names])\n")
    env = {**os.environ, "TILESEARCH_CLUSTER": "1", "TILESEARCH_STREAM_K": "1"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
