"""einsum-sum's specialized walk (a producer warp group, two consumer groups taking every other
tile of S): its constraints on the CPU, its sm_90a builds and the protocol in their generated code
(nvcc, no GPU), and on a GPU its results against float64."""

import os
import re

import pytest

from search_spaces import einsum_sum
from search_spaces.einsum_sum import EinsumSumOp
from tilesearch.records import Candidate
from tilesearch.target import Target
from tilesearch.testing.kernels import compile_all, failures_against_float64, spills

H100 = Target.from_arch("sm_90a")
OP = EinsumSumOp()
BASE = dict(algorithm="reduce_stream", block_t=64, block_k=128, block_d=32, num_stages=4, threads=128, k_split=1,
            epilogue="specialized", q_stages=2, store_buffers=2)


def why(problem, **knobs):
    return OP.space(OP.problem(**problem), H100).unmet({**BASE, **knobs})


@pytest.mark.skipif(os.environ.get("TILESEARCH_SPECIALIZED", "1") != "1", reason="TILESEARCH_SPECIALIZED=0 leaves it out")
def test_the_search_offers_it_since_a_gpu_checked_it():
    space = OP.space(OP.problem(t=1024, k=1024, h=4, d=128), H100)
    assert einsum_sum.SEARCH_SPECIALIZED and "specialized" in space["epilogue"].values()


def test_constraints_say_why_a_specialized_walk_is_invalid():
    big = dict(t=8192, k=8192, h=16, d=128)
    assert why(big) is None and why(big, k_split=2, num_stages=2) is None
    assert why({**big, "out_dtype": "bfloat16"}, block_t=128, num_stages=2) is None
    assert "reduce_stream's walk" in why(big, algorithm="fused")
    assert "three warp groups" in why(big, threads=256)
    assert "even count" in why(big, num_stages=3)
    assert "K by TMA" in why(dict(t=1000, k=3000, h=12, d=72 + 1))
    assert "S's rows" in why(dict(t=1000, k=3001, h=12, d=72))
    # hi, lo, the K stages and two staging tiles, none laid over another: 320 KB here
    assert "shared memory" in why(big, block_t=128)


CASES = {
    "fp32_out": dict(t=8192, k=8192, h=16, d=128),
    "bf16_out_split": (dict(t=8192, k=8192, h=16, d=128, out_dtype="bfloat16"),
                       dict(block_t=128, num_stages=2, k_split=2)),
    # no tile divides t or k, d padded to 96, two stages; an odd number of K tiles per split
    "odd": (dict(t=1000, k=3000, h=12, d=72), dict(block_k=64, num_stages=2, k_split=4)),
}


def candidate(name, target=H100):
    case = CASES[name]
    problem, knobs = case if isinstance(case, tuple) else (case, {})
    return Candidate("einsum_sum", dict(OP.problem(**problem)), {**BASE, **knobs}, target)


@pytest.mark.nvcc
def test_the_specialized_walk_builds_for_sm90a_with_its_protocol():
    compile_all(candidate, CASES, H100)
    for name in CASES:
        c = candidate(name)
        program = OP.build(OP.problem(**c.problem), c.config, H100)  # the reduce kernel, then the walk
        src = program.launches[1].kernel.get_kernel_source()
        # one block-wide barrier, after the mbarriers' initialisation, before the roles part
        assert src.count("__syncthreads") == 1 and src.index("__syncthreads") < src.index("warpgroup_reg_dealloc"), name
        # hi and lo arrive once; K tiles per stage; a lane of each of a group's four warps frees a stage
        assert src.count("ready[0].expect_transaction") == 2 and "empty[0].init(4)" in src, name
        # each group stages in a buffer of its own (shared-memory reuse off) behind its own named barrier
        offsets = dict(re.findall(r"void\* (s_s[01]) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)", src))
        assert len(set(offsets.values())) == 2, (name, offsets)
        assert "__sync_thread_partial(1, 128)" in src and "__sync_thread_partial(2, 128)" in src, name
        assert not spills(src), name


@pytest.mark.gpu
def test_the_specialized_walk_is_correct_against_float64_on_a_gpu():
    failures = failures_against_float64(candidate, CASES)
    assert not failures, failures
