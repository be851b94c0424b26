"""einsum-sum's analytic cost-model features (search_spaces/einsum_sum_model.py): finite for every
valid configuration, and the traffic they count follows each algorithm's reads of Q."""

import math

from search_spaces import einsum_sum
from search_spaces import einsum_sum_model as model
from tilesearch import registry
from tilesearch.target import Target

TARGET = Target.from_arch("sm_90a")


def test_features_are_finite_for_every_valid_configuration_and_the_roofline_is_a_share():
    op = registry.load("einsum_sum")
    problem = op.problem(t=300, k=1000, h=3, d=72)
    configs = list(op.space(problem, TARGET).enumerate())
    assert len(configs) > 100
    for config in configs:
        full = {**op.defaults, **config}
        got = model.features(problem.to_dict(), full, TARGET)
        assert all(math.isfinite(v) for v in got.values()), config
        assert 0 < model.roofline(problem.to_dict(), full, TARGET) <= 1


def test_q_is_read_once_per_split_by_the_fused_walk_and_once_by_the_reduce_kernel():
    op = registry.load("einsum_sum")
    problem = op.problem(t=8192, k=8192, h=16, d=128).to_dict()
    first = {knob.name: knob.values()[0] for knob in einsum_sum.knobs()}
    base = {**first, **op.defaults, "block_t": 64, "block_k": 128, "k_split": 4}
    fused = model.features(problem, {**base, "algorithm": "fused"}, TARGET)
    stream = model.features(problem, {**base, "algorithm": "reduce_stream"}, TARGET)
    direct = model.features(problem, {**base, "algorithm": "direct", "k_split": 1}, TARGET)
    assert (fused["q_reads"], stream["q_reads"], direct["q_reads"]) == (4, 1, 64)
    assert fused["kernels"] == 1 and stream["kernels"] == 2
    assert fused["prologue_share"] > 0 == stream["prologue_share"]
    assert direct["log2_flops_per_byte"] > fused["log2_flops_per_byte"]  # h times the products
