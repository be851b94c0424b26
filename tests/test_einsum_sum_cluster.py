"""einsum-sum's ``reduce_cluster`` algorithm (the hi/lo products as one GEMM of the GEMM operator's
persistent cluster program): its constraints on the CPU, its sm_90a builds and what their
generated code must hold (nvcc, no GPU), and on a GPU its results against float64."""

import re

import pytest

from search_spaces import einsum_sum
from search_spaces.einsum_sum import EinsumSumOp
from tilesearch.records import Candidate
from tilesearch.target import Target
from tilesearch.testing.kernels import compile_all, failures_against_float64, spills

H100 = Target.from_arch("sm_90a")


@pytest.fixture(autouse=True)
def offered(monkeypatch):
    """reduce_cluster in the space, here and in the compile and measuring workers started meanwhile."""
    monkeypatch.setenv("TILESEARCH_REDUCE_CLUSTER", "1")
    monkeypatch.setattr(einsum_sum, "SEARCH_REDUCE_CLUSTER", True)
    monkeypatch.setattr(EinsumSumOp, "defaults", {"cluster": "n2", "schedule": "pingpong"})
OP = EinsumSumOp()
BASE = dict(algorithm="reduce_cluster", block_t=128, block_k=128, block_d=64, num_stages=3, threads=256, k_split=1,
            epilogue="fragment", q_stages=2, store_buffers=2, cluster="n2", schedule="pingpong")
BIG = dict(t=8192, k=8192, h=16, d=128)


def why(problem, **knobs):
    return OP.space(OP.problem(**problem), H100).unmet({**BASE, **knobs})


def test_the_search_offers_it_only_when_asked(monkeypatch):
    monkeypatch.setattr(einsum_sum, "SEARCH_REDUCE_CLUSTER", False)
    space = OP.space(OP.problem(**BIG), H100)
    assert "reduce_cluster" not in space["algorithm"].values() and "cluster" not in space.names
    monkeypatch.setattr(einsum_sum, "SEARCH_REDUCE_CLUSTER", True)
    space = OP.space(OP.problem(**BIG), H100)
    assert "reduce_cluster" in space["algorithm"].values()
    assert set(space["cluster"].values()) == {"m2", "n2"} and set(space["schedule"].values()) == {"pingpong", "cooperative"}


def test_constraints_say_why_a_reduce_cluster_kernel_is_invalid():
    assert why(BIG) is None and why(BIG, schedule="cooperative", num_stages=4) is None
    assert why({**BIG, "out_dtype": "bfloat16"}, block_t=64, block_k=256, num_stages=4, cluster="m2") is None
    # two float32 staging tiles of 64x256 and four stages: 288 KB
    assert "shared memory" in why(BIG, block_t=64, block_k=256, num_stages=4)
    assert "threads=256" in why(BIG, threads=128)
    assert "2 or more" in why(BIG, num_stages=1)
    assert "divide the padded d=96" in why(dict(t=1000, k=3000, h=12, d=72))  # block_d 64
    assert why(dict(t=1000, k=3000, h=12, d=72), block_d=32) is None
    assert "16-byte aligned" in why(dict(t=1000, k=3000, h=12, d=71), block_d=32)
    assert "16-byte aligned" in why(dict(t=1000, k=3001, h=12, d=72, out_dtype="bfloat16"), block_d=32)
    # knobs of its own are pinned for the other algorithms
    other = dict(algorithm="fused", block_t=64, block_k=128, num_stages=2, threads=128, block_d=32, epilogue="fragment")
    assert "pinned" in why(BIG, **other, cluster="m2")


CASES = {
    "fp32_pingpong": BIG,
    "bf16_m2": (dict(BIG, out_dtype="bfloat16"), dict(block_t=64, block_k=256, num_stages=4, cluster="m2")),
    # no tile divides t or k, d padded to 96 (three d steps of hi, then three of lo), cooperative
    "odd_cooperative": (dict(t=1000, k=3000, h=12, d=72), dict(block_d=32, num_stages=4, schedule="cooperative")),
}


def candidate(name, target=H100):
    case = CASES[name]
    problem, knobs = case if isinstance(case, tuple) else (case, {})
    return Candidate("einsum_sum", dict(OP.problem(**problem)), {**BASE, **knobs}, target)


@pytest.mark.nvcc
def test_reduce_cluster_builds_for_sm90a_and_reads_k_once_for_hi_and_lo():
    compile_all(candidate, CASES, H100)
    for name in CASES:
        c = candidate(name)
        program = OP.build(OP.problem(**c.problem), c.config, H100)  # the joined reduce, then the GEMM
        reduce_src = program.launches[0].kernel.get_kernel_source()
        src = program.launches[1].kernel.get_kernel_source()
        assert "HiLo" in reduce_src and "gemm_cluster_persistent" in src, name
        # A's reduction tile walks hi then lo; K's wraps round its padded d for the lo half
        steps = -(-c.problem["d"] // 32) * 32 // c.config["block_d"]
        wrap = r"\(ko & 1\)" if steps == 2 else rf"\(ko % {steps}\)"
        assert re.search(r"tma_load\w*\(A_desc, [^;]*\(ko \* \d+\)", src), name
        assert re.search(rf"tma_load\w*\(B_desc, [^;]*{wrap} \* \d+\)", src), name
        assert not spills(src), name
    # a ping-pong kernel stages each group's tile of S in a buffer of its own, in float32
    src = OP.build(OP.problem(**BIG), {**BASE}, H100).launches[1].kernel.get_kernel_source()
    offsets = re.findall(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\);", src)
    assert len(offsets) == 4 and len({at for _, at in offsets}) == 4, offsets


@pytest.mark.gpu
def test_reduce_cluster_is_correct_against_float64_on_a_gpu():
    failures = failures_against_float64(candidate, CASES)
    assert not failures, failures
