"""The GEMM's stream-K program (the last partial wave spread over every SM in K, fixed up in the
kernel): its schedule's arithmetic and constraints on the CPU, its sm_90a builds (nvcc, no GPU),
and on a GPU its results against float64 on awkward shapes, call after call."""

import os
import random
import re

import pytest

from search_spaces import gemm
from search_spaces.gemm import DEFAULTS, GemmOp
from search_spaces.gemm_stream_k import tail_owner, tail_run, workspace_shapes
from tilesearch.composite import Composite
from tilesearch.records import Candidate
from tilesearch.target import Target
from tilesearch.testing.kernels import compile_all, failures_against_float64, spills

H100 = Target.from_arch("sm_90a")
BASE = {**DEFAULTS, **dict(block_m=128, block_n=128, block_k=64, num_stages=4, threads=256, panel_size=8,
                            warp_policy="full_row", persistent=True, stream_k=3)}
OP = GemmOp()


def why(problem, **knobs):
    problem = OP.problem(**problem)
    return OP.space(problem, H100).unmet({**BASE, **knobs})


def value(expr):
    """An integer expression TileLang's helpers built from integers, evaluated."""
    from tvm import arith

    return expr if isinstance(expr, int) else int(arith.Analyzer().simplify(expr))


def test_the_tail_is_dealt_out_whole_once_and_each_iteration_has_its_owner():
    """Every tail iteration belongs to exactly one block's run, each block that shares the tail
    gets at least one, a run spans at most two tiles, and ``tail_owner`` names the block whose run
    holds an iteration: the fix-up counts a tile's blocks from it."""
    import tilelang  # noqa: F401  (TileLang before TVM)
    from tvm import tirx

    rng = random.Random(0)
    for _ in range(120):
        workers = rng.choice([132, 114, 78, 16])
        k_tiles = rng.choice([8, 13, 64, 224])
        slices = rng.choice([2, 3, 4])
        tail = rng.randint(1, workers - 1)
        blocks, iters = min(tail * slices, workers), tail * k_tiles
        owner = {}
        for b in range(workers):
            first, end = (value(e) for e in tail_run(tirx.IntImm("int32", b), blocks, iters))
            assert (end > first) == (b < blocks), (b, blocks)
            assert (end - 1) // k_tiles - first // k_tiles <= 1 or end == first  # at most two pieces
            for x in range(first, end):
                assert x not in owner
                owner[x] = b
        assert sorted(owner) == list(range(iters))
        for x in rng.sample(range(iters), min(iters, 200)):
            assert value(tail_owner(tirx.IntImm("int32", x), blocks, iters)) == owner[x]


@pytest.mark.skipif(os.environ.get("TILESEARCH_STREAM_K") == "1", reason="TILESEARCH_STREAM_K=1 offers it")
def test_the_knob_stays_out_of_the_space_until_it_is_searched():
    problem = OP.problem(m=784, n=6144, k=4096)
    assert not gemm.SEARCH_STREAM_K and "stream_k" not in OP.space(problem, H100).names
    assert "stream_k" not in DEFAULTS


def test_constraints_say_why_a_stream_k_configuration_is_invalid():
    mid = dict(m=784, n=6144, k=4096, dtype="bfloat16", layout="nt")  # 7 x 48 = 336 tiles of 128x128
    assert why(mid) is None
    assert "persistent loop" in why(mid, persistent=False)
    assert "one K split" in why(mid, split_k=2)
    assert "unswapped" in why(mid, swap_ab=True, block_m=64, warp_policy="full_row")
    assert "TMA" in why(mid, tma=False, warp_specialize="off")
    assert "warp_specialize=on" in why(mid, warp_specialize="role_based")
    assert "num_stages >= 2" in why(mid, num_stages=1)
    # TileLang's persistent-loop hang is not this program's (its barriers are its own)
    assert why(mid, num_stages=2) is None
    assert "fewer than 4 per slice" in why(dict(mid, k=640), stream_k=3)  # 10 K tiles
    assert why(dict(mid, k=768), stream_k=3) is None
    assert "16-byte aligned" in why(dict(mid, k=4100))
    assert "whole waves" in why(dict(mid, m=128 * 11))  # 11 x 48 = 528 = 4 x 132 tiles
    # one partial wave is all tail: no persistent template there, but stream-K spreads it
    one_wave = dict(m=784, n=4096, k=4096, dtype="bfloat16", layout="nt")
    assert "one wave" in why(one_wave, block_n=256, stream_k=1)
    assert why(one_wave, block_n=256) is None
    # the staging tile is kept apart from the stages (as the persistent template's)
    assert "shared memory" in why(mid, block_n=256, epilogue="smem", num_stages=4)
    assert why(mid, block_n=256, epilogue="smem", num_stages=3) is None


CASES = {
    # a partial wave of 92 tiles over 132 SMs after one full one
    "qkv784_smem": ((784, 6144, 4096, "bfloat16", "nt"), dict(block_n=192, epilogue="smem")),
    # all tail (112 tiles), two slices, direct epilogue: M's edge predicated in the store
    "one_wave_direct": ((784, 4096, 4096, "bfloat16", "nt"), dict(block_n=256, stream_k=2)),
    # a tail of 12 tiles shared by 48 blocks, K not a multiple of block_k, one consumer warp group
    "small_tail_odd_k": ((2657, 4096, 1000, "float16", "nt"), dict(stream_k=4, threads=128, block_m=64,
                                                                  block_n=128, panel_size=0)),
    # B stored K x N, column raster
    "nn_column": ((1000, 3000, 2048, "float16", "nn"), dict(raster="column", panel_size=4, epilogue="smem",
                                                          num_stages=3)),
}


def candidate(name, target=H100):
    (m, n, k, dtype, layout), knobs = CASES[name]
    return Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), {**BASE, **knobs}, target)


def test_every_case_is_one_the_space_allows():
    for name in CASES:
        c = candidate(name)
        assert why(c.problem, **c.config) is None, name


@pytest.mark.nvcc
def test_the_stream_k_program_builds_for_sm90a_with_its_fix_up():
    compile_all(candidate, CASES, H100)
    for name in CASES:
        c = candidate(name)
        program = OP.build(OP.problem(**c.problem), c.config, H100)  # TileLang's cache now
        assert isinstance(program, Composite), name
        partials, counters = workspace_shapes(c.config["block_m"], c.config["block_n"], H100.num_sms)
        assert [(w.name, w.shape, w.dtype, w.zeroed) for w in program.workspaces.specs] == [
            ("W", partials, "float32", False), ("S", counters, "int32", True)], name
        src = program.get_kernel_source()
        # one elected consumer thread counts in after a fence, and fences again before reading
        assert re.search(r"tl_shuffle_elect<" + str(c.config["threads"]) + r">\(\)\) \{\s*ts_fence\(\);", src), name
        assert "AtomicAddRet((&(S[" in src and src.count("ts_fence();") == 2, name
        # the last block sets the counter back to zero for the next call
        assert re.search(r"S\[[^\]]+\] = 0;", src), name
        # no block-wide barrier the producer and the consumers could deadlock on, past the start
        assert src.count("__syncthreads") == 1, name
    c = candidate("qkv784_smem")
    assert not spills(OP.build(OP.problem(**c.problem), c.config, H100).get_kernel_source())


@pytest.mark.nvcc
def test_the_stream_k_program_builds_with_m_at_run_time():
    """A range's kernel takes M at run time: the tail, its blocks and the full rounds follow it,
    and the workspaces do not (their size is set by the SMs)."""
    c = candidate("small_tail_odd_k")
    program = OP.build(OP.problem(**c.problem), c.config, H100, runtime=("m",))
    assert "AtomicAddRet" in program.get_kernel_source()
    assert all(isinstance(d, int) for w in program.workspaces.specs for d in w.shape)


@pytest.mark.gpu
def test_the_stream_k_program_is_correct_against_float64_on_a_gpu():
    failures = failures_against_float64(candidate, CASES)
    assert not failures, failures


@pytest.mark.gpu
def test_each_call_finds_the_counters_zero_again():
    """The counters are zeroed once, at allocation: a fix-up that did not reset them would leave
    a later call's tail tiles unstored (or stored early). Three calls on fresh inputs into outputs
    filled with NaN each equal float64 within the tolerance."""
    import torch

    c = candidate("qkv784_smem")
    problem = OP.problem(**c.problem)
    program = OP.build(problem, c.config, Target.from_arch("sm_90a"))
    tolerance = OP.tolerance(problem, c.config)
    gen = torch.Generator(device="cuda")
    for seed in range(3):
        gen.manual_seed(seed)
        a, b = OP.make_inputs(problem, torch.device("cuda"), gen)
        out = torch.full((problem["m"], problem["n"]), float("nan"), device="cuda", dtype=torch.bfloat16)
        program(a, b, out)
        ref = OP.reference(problem, (a, b))[0]
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < tolerance.rel_fro, (seed, err)
