"""The grouped GEMM plugin's own checks (the operator conformance suite in
tests/test_operators.py covers the rest): routing, the tile table, reference and baseline on the
CPU, and its prior."""

import math

import pytest
import torch
from tilesearch_grouped_gemm import GroupedGemmOp, expert_rows
from tilesearch_grouped_gemm.template import tile_table

from tilesearch import registry
from tilesearch.target import Target

H100 = Target.from_arch("sm_90a")


def test_registered_only_through_its_entry_point():
    assert registry.available()["grouped_gemm"] == "tilesearch_grouped_gemm.op:GroupedGemmOp"
    assert isinstance(registry.load("grouped_gemm"), GroupedGemmOp)


@pytest.mark.parametrize("tokens,experts", [(8192, 8), (301, 5), (6, 8), (4096, 64)])
def test_routing_spreads_every_token(tokens, experts):
    for routing in ("even", "skewed"):
        rows = expert_rows(tokens, experts, routing)
        assert len(rows) == experts and sum(rows) == tokens and min(rows) >= 0
    skewed = expert_rows(tokens, experts, "skewed")
    assert skewed[0] >= skewed[-1] and (tokens < experts or skewed[0] > skewed[-1] or experts == 1)
    assert max(expert_rows(tokens, experts, "even")) - min(expert_rows(tokens, experts, "even")) <= 1


def test_tile_table_gives_each_output_tile_to_one_block():
    sizes, bm, bn, n = (300, 0, 77, 1000, 0), 128, 64, 200
    first_tile, first_row = tile_table(sizes, bm, bn, n)
    covered = set()
    for b in range(first_tile[-1]):  # what the program computes per block, in Python
        e = sum(b >= first_tile[i] for i in range(1, len(sizes)))
        local = b - first_tile[e]
        tm, tn = local % math.ceil(sizes[e] / bm), local // math.ceil(sizes[e] / bm)
        for r in range(first_row[e] + tm * bm, min(first_row[e] + (tm + 1) * bm, first_row[e + 1])):
            for c in range(tn * bn, min((tn + 1) * bn, n)):
                assert (r, c) not in covered
                covered.add((r, c))
    assert len(covered) == sum(sizes) * n


def test_reference_and_baseline_agree_on_cpu():
    op = GroupedGemmOp()
    problem = op.problem(experts=5, tokens=301, n=48, k=40, dtype="float16")
    x, w = op.make_inputs(problem, torch.device("cpu"), torch.Generator().manual_seed(0))
    (ref,) = op.reference(problem, (x, w))
    row = 0
    for e, rows in enumerate(op.sizes(problem)):
        want = x[row:row + rows].double() @ w[e].double().T
        torch.testing.assert_close(ref[row:row + rows], want)
        row += rows
    got = op.baseline(problem, (x, w))().double()
    assert ((got - ref).norm() / ref.norm()).item() < op.tolerance(problem, {}).rel_fro


def test_prior_prefers_short_row_tiles_for_experts_with_few_rows():
    op = GroupedGemmOp()
    few = op.problem(experts=64, tokens=2048, n=1408, k=2048, routing="even")  # 32 rows an expert
    base = dict(block_n=128, block_k=64, num_stages=3, threads=128, warp_policy="square", raster="m_fastest",
                epilogue="direct")
    assert op.estimate(few, {**base, "block_m": 64}, H100) > op.estimate(few, {**base, "block_m": 256}, H100)
    assert op.features(few, {**base, "block_m": 64}, H100)["row_pad_waste"] == pytest.approx(1.0)
