"""The GEMM's cluster program (pairs of blocks sharing an operand through TMA multicast): its
constraints on the CPU, its sm_90a builds and the protocol in their generated code (nvcc, no GPU),
and on a GPU its results against float64 on awkward shapes."""

import os
import re

import pytest

from search_spaces import gemm
from search_spaces.gemm import DEFAULTS, GemmOp
from tilesearch.records import Candidate
from tilesearch.target import Target
from tilesearch.testing.kernels import compile_all, failures_against_float64, spills

H100 = Target.from_arch("sm_90a")
BASE = dict(block_m=128, block_n=256, block_k=64, num_stages=4, threads=256, panel_size=8, warp_policy="full_row",
            **DEFAULTS)
OP = GemmOp()


def why(problem, **knobs):
    problem = OP.problem(**problem)
    return OP.space(problem, H100).unmet({**BASE, **knobs})


@pytest.mark.skipif(os.environ.get("TILESEARCH_CLUSTER") == "1", reason="TILESEARCH_CLUSTER=1 offers it")
def test_the_knob_stays_out_of_the_space_until_it_is_searched():
    problem = OP.problem(m=4096, n=4096, k=4096)
    assert not gemm.SEARCH_CLUSTER and "cluster" not in OP.space(problem, H100).names
    assert "cluster" not in DEFAULTS


@pytest.mark.skipif(os.environ.get("TILESEARCH_CLUSTER") == "1", reason="TILESEARCH_CLUSTER=1 offers it everywhere")
def test_the_knob_is_offered_where_k_is_short_and_the_tiles_fill_the_sms_twice():
    def offered(m, n, k, **problem):
        space = OP.space(OP.problem(m=m, n=n, k=k, **problem), H100)
        return "cluster" in space.names and space["cluster"].values()

    assert offered(8192, 8192, 256) == ("off", "m2", "n2", "single")  # no k2: it splits tiles that leave SMs idle
    assert offered(2048, 14336, 512, dtype="bfloat16", layout="nt") and offered(8192, 8192, 1024)
    assert not offered(8192, 8192, 2048)  # past CLUSTER_MAX_K the template was ahead
    assert not offered(1024, 1024, 1024)  # 32 of the largest tiles: no next tile to load while storing
    assert not offered(4097, 4095, 129)  # rows of A are not 16-byte aligned for its TMA loads
    space = OP.space(OP.problem(m=8192, n=8192, k=256), H100)
    assert space["schedule"].values() == ("cooperative", "pingpong")
    assert space["epilogue"].values() == ("direct", "smem", "chunked")  # the cluster program's own there
    assert OP.space(OP.problem(m=4096, n=4096, k=4096), H100)["epilogue"].values() == ("direct", "smem")
    chunked = {**BASE, "persistent": True, "epilogue": "chunked", "cluster": "single", "schedule": "cooperative"}
    assert space.why_invalid(chunked) is None
    assert "cluster program" in space.why_invalid({**chunked, "cluster": "off"})
    for policy in ("square", "full_col"):  # a chunk's columns held by half of the warps: wrong results
        assert "warp_policy=full_row" in space.why_invalid({**chunked, "warp_policy": policy})
    tile = {**BASE, "block_n": 128, "persistent": True, "epilogue": "smem", "cluster": "n2"}
    assert space.why_invalid({**tile, "schedule": "pingpong"}) is None
    # there only its persistent loop with the smem epilogue is offered (others were 0.29-0.60x cuBLAS)
    assert "only the persistent program" in space.why_invalid({**tile, "persistent": False, "schedule": "cooperative"})
    assert "only the persistent program" in space.why_invalid({**tile, "epilogue": "direct", "schedule": "cooperative"})
    assert why(dict(m=4096, n=4096, k=4096), cluster="m2") is None  # (elsewhere, under TILESEARCH_CLUSTER=1)
    # a clustered best's rivals take the other schedule at its tile, second, right after the chunked
    # rival (the polish times only its first few; ping-pong ran 10% ahead of the cooperative best there)
    best = {**BASE, "block_n": 128, "persistent": True, "cluster": "n2", "schedule": "cooperative"}
    assert OP.rivals(OP.problem(m=8192, n=8192, k=256), space, best)[1] == {**best, "schedule": "pingpong"}
    smem = {**best, "epilogue": "smem", "num_stages": 5}
    found = OP.rivals(OP.problem(m=8192, n=8192, k=256), space, smem)
    assert found[0]["epilogue"] == "chunked" and found[1] == {**smem, "schedule": "pingpong"}
    assert space.why_invalid(found[1]) is None
    # and the first rival of any best there is the single block's persistent chunked program at its tile
    # (its warps holding whole rows and the probe's 4 stages of 64, whatever the best's split and pipeline)
    for searched in ({**best, "epilogue": "smem"},
                     {**BASE, "persistent": True, "epilogue": "smem", "cluster": "off", "schedule": "cooperative"},
                     {**BASE, "persistent": True, "epilogue": "smem", "cluster": "off", "schedule": "cooperative",
                      "warp_policy": "square", "block_k": 128, "num_stages": 2}):
        first = OP.rivals(OP.problem(m=8192, n=8192, k=256), space, searched)[0]
        assert first == {**searched, "cluster": "single", "persistent": True, "epilogue": "chunked",
                         "warp_policy": "full_row", "block_k": 64, "num_stages": 4}
        assert space.why_invalid(first) is None
    # a 256-row tile's staging buffers leave room for 3 stages of 64
    tall = {**BASE, "block_m": 256, "block_n": 128, "persistent": True, "epilogue": "smem", "cluster": "off",
            "schedule": "cooperative"}
    first = OP.rivals(OP.problem(m=8192, n=8192, k=256), space, tall)[0]
    assert (first["epilogue"], first["block_k"], first["num_stages"]) == ("chunked", 64, 3)
    assert space.why_invalid(first) is None and "shared memory" in space.why_invalid({**first, "num_stages": 4})


def test_tilesearch_cluster_single_offers_the_single_block_alone_where_k_is_long_and_tiles_outnumber_sms():
    """The environment is read at import, so in a fresh process: the knob off or single with the
    chunked epilogue at long K where the largest tiles outnumber the SMs (no schedule: one block,
    cooperative), no knob where they do not; short K keeps its own."""
    import subprocess
    import sys

    code = (
        "from search_spaces.gemm import GemmOp; from tilesearch.target import Target\n"
        "op, t = GemmOp(), Target.from_arch('sm_90a')\n"
        "for p in (dict(m=2048, n=4096, k=4096, dtype='bfloat16', layout='nt'), dict(m=8192, n=8192, k=256),\n"
        "          dict(m=512, n=4608, k=3584, dtype='float16', layout='nt'), dict(m=16, n=6144, k=4096)):\n"
        "    s = op.space(op.problem(**p), t)\n"
        "    print(s['cluster'].values() if 'cluster' in s.names else None, s['epilogue'].values(), 'schedule' in s.names)\n"
    )
    env = {**os.environ, "TILESEARCH_CLUSTER": "single"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "('off', 'single') ('direct', 'smem', 'chunked') False",
        "('off', 'm2', 'n2', 'single') ('direct', 'smem', 'chunked') True",
        # where the largest tiles do not outnumber the SMs (72 and 24 of them on 132) there is no next
        # tile for its persistent loop: the default space, not a knob the search would pay for
        "None ('direct', 'smem') False",
        "None ('direct', 'smem') False",
    ]


def test_constraints_say_why_a_cluster_configuration_is_invalid():
    square = dict(m=4096, n=4096, k=4096)
    assert why(square, cluster="m2") is None and why(square, cluster="n2") is None
    assert "whole tiles, unswapped" in why(square, cluster="m2", split_k=2)
    assert why(square, cluster="m2", persistent=True) is None
    # the hang of TileLang's persistent pipeline with 2 stages is not the cluster program's
    assert "hangs" in why(square, persistent=True, num_stages=2)
    assert why(square, cluster="n2", persistent=True, num_stages=2) is None
    assert "cluster program" in why(square, schedule="pingpong", block_n=128)
    assert "persistent loop" in why(square, cluster="m2", schedule="pingpong", block_n=128)
    assert "persistent loop" in why(square, cluster="m2", schedule="pingpong", persistent=True, threads=128,
                                    block_m=64, block_n=128)
    assert "registers" in why(square, cluster="m2", schedule="pingpong", persistent=True)  # 128x256 in 128 threads
    assert why(square, cluster="m2", schedule="pingpong", persistent=True, block_n=128) is None
    long_k = dict(m=1024, n=1024, k=14336)  # 64 tiles of 128x128
    assert why(long_k, cluster="k2", block_n=128) is None
    assert "fill 132 SMs" in why(square, cluster="k2", block_n=128)
    assert "fewer than 4 K tiles" in why(dict(m=1024, n=1024, k=448), cluster="k2", block_n=128)
    # the partner's partial sums take a float32 tile of their own: 128 KB for 128x256
    assert why(long_k, block_n=256, num_stages=3) is None
    assert "shared memory" in why(long_k, cluster="k2", block_n=256, num_stages=3)
    # one stage hangs: its refill waits on a release that waits on the refill
    assert "num_stages >= 2" in why(square, cluster="m2", num_stages=1, block_n=128)
    # the staging tile is not laid over the stages (262144 B asked for at launch on an H200)
    assert "shared memory" in why(square, cluster="n2", epilogue="smem")
    assert "TMA" in why(square, cluster="n2", tma=False, warp_specialize="off", epilogue="smem", num_stages=3)
    assert "same kernel as warp_specialize=on" in why(square, cluster="m2", warp_specialize="role_based")
    assert "16-byte aligned" in why(dict(m=4096, n=4096, k=4100), cluster="m2")
    assert "16-byte aligned" in why(dict(m=4096, n=4100, k=4096, layout="nn"), cluster="n2")
    assert why(dict(m=4096, n=4100, k=4096, layout="nt"), cluster="n2") is None  # B's rows are K long
    assert "no pair to share B" in why(dict(m=100, n=4096, k=4096), cluster="m2", panel_size=0)
    assert "no pair to share A" in why(dict(m=4096, n=256, k=4096), cluster="n2")


def test_a_configuration_without_the_knob_builds_the_plain_template():
    import tilelang  # noqa: F401  (TileLang before TVM)

    problem = OP.problem(m=256, n=256, k=256)
    config = {**BASE, "block_n": 128}
    assert OP.pass_configs(problem, {**config, "cluster": "m2"}) == {"tl.disable_thread_storage_sync": True}
    assert OP.pass_configs(problem, {**config, "cluster": "k2"})["tl.disable_shared_memory_reuse"]
    assert OP.program(problem, config, H100).attrs["global_symbol"] == "gemm"
    assert OP.program(problem, {**config, "cluster": "m2"}, H100).attrs["global_symbol"] == "gemm_cluster"


CASES = {
    "m2_nt_fp16": ((4096, 4096, 4096, "float16", "nt"), dict(cluster="m2")),
    "n2_nn_bf16_smem": ((4096, 4096, 4096, "bfloat16", "nn"), dict(cluster="n2", epilogue="smem", num_stages=3)),
    # odd tile counts on the shared axis (the last pair keeps an idle partner), K not a multiple
    # of block_k, one consumer warp group
    "m2_odd_one_consumer": ((800, 3000, 520, "float16", "nt"),
                            dict(cluster="m2", block_n=128, threads=128, num_stages=3, panel_size=0)),
    "n2_odd_column_raster": ((2000, 800, 1000, "bfloat16", "nt"),
                             dict(cluster="n2", block_m=128, block_n=128, raster="column", panel_size=4)),
    # more pairs than half the SMs: each pair of blocks loops, its last wave partly idle
    "m2_persistent_smem": ((8192, 8192, 1024, "float16", "nn"), dict(cluster="m2", persistent=True, epilogue="smem",
                                                                                      num_stages=3)),
    "n2_persistent_odd": ((3000, 5000, 4000, "bfloat16", "nt"),
                          dict(cluster="n2", persistent=True, block_n=128, num_stages=2)),
    # each consumer warp group takes every other tile whole
    "n2_pingpong": ((4096, 4096, 4096, "bfloat16", "nt"),
                    dict(cluster="n2", persistent=True, schedule="pingpong", block_m=128, block_n=128)),
    "m2_pingpong_smem": ((8192, 2048, 1000, "float16", "nn"),
                         dict(cluster="m2", persistent=True, schedule="pingpong", block_m=64, block_n=256,
                              epilogue="smem", num_stages=3)),
    # K of four tiles: one group's epilogue meets the other's (their staging tiles must be apart)
    "n2_pingpong_short_k": ((8192, 8192, 256, "bfloat16", "nt"),
                            dict(cluster="n2", persistent=True, schedule="pingpong", block_m=128, block_n=128,
                                 epilogue="smem", panel_size=4)),
    # K split between the pair, block 1's partial sums reduced into block 0 through shared memory;
    # an odd number of K tiles (block 0 takes the extra one)
    "k2_long_k": ((1024, 1024, 14336, "float16", "nn"), dict(cluster="k2", block_n=128)),
    "k2_odd_smem": ((300, 1000, 4000, "bfloat16", "nt"),
                    dict(cluster="k2", block_n=128, threads=128, epilogue="smem", num_stages=3)),    # the tile stored 64 columns at a time through two staging buffers (epilogue="chunked")
    "n2_chunked_nn_fp16": ((2048, 4096, 1000, "float16", "nn"), dict(cluster="n2", epilogue="chunked")),
}


def test_every_case_is_one_the_space_allows():
    for name in CASES:
        c = candidate(name)
        assert why(c.problem, **c.config) is None, name


def candidate(name, target=H100):
    (m, n, k, dtype, layout), knobs = CASES[name]
    return Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), {**BASE, **knobs}, target)


@pytest.mark.nvcc
def test_the_cluster_program_builds_for_sm90a_with_its_protocol():
    compile_all(candidate, CASES, H100)
    for name in CASES:
        c = candidate(name)
        src = OP.build(OP.problem(**c.problem), c.config, H100).get_kernel_source()  # TileLang's cache now
        # every stage barrier waits in the program's own spin (no 10 ms suspend hint)
        assert "ts_spin_wait(full[" in src and "ts_spin_wait(empty[" in src, name
        assert not re.search(r"(full|empty)\[[^\]]*\]\.wait\(", src), name
        if c.config["cluster"] == "k2":
            # each block loads its own half of K and frees its own stages; block 1 copies its
            # partial sums into block 0's shared memory in one bulk transfer, which block 0 awaits
            assert "multicast" not in src and "arrive(0u)" not in src and "tma_store_cluster" in src, name
            assert re.search(r"red_bar(_mem)?\[0\]\.wait\(0\)", src), name
            assert src.count("tl::cluster_sync();") == 3 and "__syncthreads" not in src, name
            continue
        # the lower rank multicasts the shared tile into both blocks; each block expects its bytes
        assert "tma_load_multicast" in src and "block_rank_in_cluster() == 0" in src, name
        owners = 2 if c.config.get("schedule") == "pingpong" else 1  # warp groups that each own a tile
        assert src.count("expect_transaction") == 2, name
        assert not re.search(r"block_rank_in_cluster\(\) == 0\) \{\s*full\[[^]]+\]\.expect_transaction", src), name
        # consumers release each stage in both blocks; the cluster meets after init and before exit
        assert re.search(r"tl_shuffle_elect<32>\(\)\) \{\s*empty\[[^]]+\]\.arrive\(0u\);\s*"
                         r"empty\[[^]]+\]\.arrive\(1u\);", src), name
        assert re.search(r"empty\[0\]\.init\(" + str(c.config["threads"] // owners // 32 * 2) + r"\)", src), name
        assert src.count("tl::cluster_sync();") == 3 and src.rstrip().endswith("tl::cluster_sync();\n}"), name
        # no block-wide barrier the producer (waiting on a stage) and consumers could deadlock on
        assert "__syncthreads" not in src, name
        if owners == 2 and c.config["epilogue"] == "smem":
            # each group stages its tile in its own shared memory (TileLang laid them at one offset)
            offsets = re.findall(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\);", src)
            assert len(offsets) == 4 and len({at for _, at in offsets}) == 4, (name, offsets)
    src = OP.build(OP.problem(**candidate("n2_nn_bf16_smem").problem), candidate("n2_nn_bf16_smem").config,
                   H100).get_kernel_source()
    assert "warpgroup_reg_dealloc<40>" in src and "warpgroup_reg_alloc<232>" in src
    assert "fence_proxy_async" in src and "__sync_thread_partial(1, 256)" in src and "tma_store" in src
    # ping-pong: each group waits for the other's turn before its main loop and hands the turn on after it
    c = candidate("n2_pingpong")
    src = OP.build(OP.problem(**c.problem), c.config, H100).get_kernel_source()
    for mine, other in ((3, 4), (4, 3)):
        # (an odd turn is never the first: TileLang drops the test there)
        assert re.search(rf"(if \(0 < turn[_0-9]*\) \{{|== 1\)\) \{{)\s*tl::__sync_thread_partial\({mine}, 256\);", src)
        assert f"tl::__named_barrier_arrive({other}, 256);" in src


@pytest.mark.nvcc
def test_the_two_consumer_groups_keep_their_accumulators_in_registers():
    """With 384 threads ptxas has 168 registers a thread: a 128x256 tile's 128 accumulators fit,
    and so do ping-pong's two 128x128 accumulators, each live only in its own group's loop."""
    for name in ("m2_nt_fp16", "n2_pingpong"):
        c = candidate(name)
        assert not spills(OP.build(OP.problem(**c.problem), c.config, H100).get_kernel_source()), name


@pytest.mark.nvcc
def test_the_cluster_program_builds_with_m_at_run_time():
    """A shape range's export compiles M as a run-time value: the launch grid's whole pairs
    of tile rows follow it."""
    c = candidate("m2_odd_one_consumer")
    kernel = OP.build(OP.problem(**c.problem), c.config, H100, runtime=("m",))
    src = kernel.get_kernel_source()
    assert "tma_load_multicast" in src and "__syncthreads" not in src


@pytest.mark.gpu
def test_the_cluster_program_is_correct_against_float64_on_a_gpu():
    failures = failures_against_float64(candidate, CASES)
    assert not failures, failures


# the program without a partner (cluster="single"), a probe's variant: local barriers, no multicast
SINGLE_CASES = {
    "single_nt_bf16_odd": ((2000, 3000, 1000, "bfloat16", "nt"), dict(cluster="single", num_stages=4)),
    "single_nn_fp16_smem": ((1024, 2048, 4096, "float16", "nn"),
                            dict(cluster="single", epilogue="smem", num_stages=3, panel_size=0)),
    "single_persistent_odd": ((3000, 5000, 4000, "bfloat16", "nt"),
                              dict(cluster="single", persistent=True, block_n=128, num_stages=2)),
    "single_pingpong_smem": ((4096, 4096, 4096, "bfloat16", "nt"),
                             dict(cluster="single", persistent=True, schedule="pingpong", block_n=128,
                                  epilogue="smem", num_stages=5)),
    # the tile stored 64 columns at a time through two staging buffers; edges of M and N, whole
    # chunks past N (TMA skips them), the stores in flight across a persistent loop's tiles
    "single_chunked_persistent_odd": ((3000, 5000, 4000, "bfloat16", "nt"),
                                      dict(cluster="single", persistent=True, epilogue="chunked")),
    # the chunked rival of a 256-row best: 3 stages of 64 beside its staging buffers
    "single_chunked_tall": ((8192, 8192, 256, "bfloat16", "nt"),
                            dict(cluster="single", persistent=True, epilogue="chunked", block_m=256, block_n=128,
                                 num_stages=3)),
    "single_chunked_pingpong": ((4096, 4096, 2048, "float16", "nt"),
                                dict(cluster="single", persistent=True, schedule="pingpong", block_n=128,
                                     epilogue="chunked", num_stages=5)),
}


def single_candidate(name, target=H100):
    (m, n, k, dtype, layout), knobs = SINGLE_CASES[name]
    return Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), {**BASE, **knobs}, target)


# forms the search no longer offers, kept as cases for the probes that time them: where K is long
# only the single block's persistent loop with the chunked epilogue (the others were 3-10% behind)
PROBE_ONLY = ("single_nt_bf16_odd", "single_nn_fp16_smem", "single_persistent_odd", "single_pingpong_smem")


def test_the_single_block_program_is_a_value_of_the_searched_knob():
    assert "single" in gemm.CLUSTERS and "single" in gemm.SHORT_K_CLUSTERS
    for name in SINGLE_CASES:
        c = single_candidate(name)
        reason = why(c.problem, **c.config)
        if name in PROBE_ONLY:
            assert "where K is long only the single block's persistent loop" in reason, name
        else:
            assert reason is None, name


def test_where_k_is_long_the_single_block_is_offered_in_its_persistent_chunked_form_alone():
    long_k = dict(m=2048, n=28672, k=4096, dtype="bfloat16", layout="nt")
    chunked = dict(cluster="single", persistent=True, epilogue="chunked")
    assert why(long_k, **chunked) is None
    for other in (dict(persistent=False), dict(epilogue="smem", num_stages=3), dict(epilogue="direct")):
        assert "only the single block's persistent loop" in why(long_k, **{**chunked, **other}), other
    # the template's own forms are untouched, and where K is short the smem epilogue stays offered
    assert why(long_k, epilogue="direct") is None and why(long_k, epilogue="smem", num_stages=3) is None
    short_k = dict(m=8192, n=8192, k=256, dtype="bfloat16", layout="nt")
    assert why(short_k, cluster="single", persistent=True, epilogue="smem", block_n=128, num_stages=4) is None


@pytest.mark.nvcc
def test_the_single_block_program_keeps_its_barriers_local():
    compile_all(single_candidate, SINGLE_CASES, H100)
    for name in SINGLE_CASES:
        c = single_candidate(name)
        src = OP.build(OP.problem(**c.problem), c.config, H100).get_kernel_source()
        assert "multicast" not in src and "cluster_sync" not in src and "arrive(0u)" not in src, name
        owners = 2 if c.config.get("schedule") == "pingpong" else 1
        assert re.search(r"empty\[0\]\.init\(" + str(c.config["threads"] // owners // 32) + r"\)", src), name
        # one MMA stage stays in flight: the stage before is released after the wait for all but one
        assert "tl::wait_wgmma<1>();" in src and "ts_spin_wait(empty[" in src, name
        if c.config["epilogue"] == "chunked":
            # a staging buffer is written once the store issued from it before has read it
            assert src.count("tl::tma_store_wait<1, true>();") == (2 if owners == 2 else 1), name
            assert "tl::tma_store_arrive();" in src and "tl::tma_store_wait<0, true>();" in src, name


def test_the_chunked_epilogue_is_the_cluster_programs_and_fits_four_stages_at_128x256():
    square = dict(m=4096, n=4096, k=4096)
    assert "cluster program" in why(square, epilogue="chunked")
    assert "multiple of" in why(dict(m=4096, n=4608, k=4096), cluster="single", epilogue="chunked", block_n=144)
    assert why(square, cluster="single", epilogue="chunked", persistent=True) is None  # 4 stages: 192 KiB + 2 x 16 KiB
    assert "shared memory" in why(square, cluster="single", epilogue="smem")


@pytest.mark.gpu
def test_the_single_block_program_is_correct_against_float64_on_a_gpu():
    failures = failures_against_float64(single_candidate, SINGLE_CASES)
    assert not failures, failures


def test_the_knob_ablation_adds_the_knob_the_space_leaves_out():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "knob_ablation.py"
    spec = importlib.util.spec_from_file_location("knob_ablation", path)
    ablation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ablation)
    problem = OP.problem(m=4096, n=4096, k=4096)
    space = ablation.with_values(OP.space(problem, H100), "cluster", ["off", "m2", "n2"])
    chosen = {**BASE, "persistent": True, "cluster": "off"}
    found = ablation.variants(space, chosen, ["cluster", "persistent"])
    assert found[0] == chosen and len(found) == 6
    # a choice the cluster program cannot compute gets no clustered variant
    decode = OP.problem(m=16, n=4096, k=4096)
    space = ablation.with_values(OP.space(decode, H100), "cluster", ["off", "m2", "n2"])
    swapped = {**BASE, "block_m": 16, "block_n": 128, "threads": 128, "panel_size": 0, "swap_ab": True,
               "cluster": "off"}
    assert space.why_invalid(swapped) is None
    assert ablation.variants(space, swapped, ["cluster"]) == [swapped]


def test_the_prior_and_the_rivals_know_the_cluster_program():
    from search_spaces import gemm_model

    big, long_k = OP.problem(m=8192, n=8192, k=8192), OP.problem(m=1024, n=1024, k=14336)
    tile = {**{k: v for k, v in BASE.items() if k not in ("cluster", "schedule")}, "block_n": 128}
    assert gemm_model.estimate(big, {**BASE, "cluster": "m2"}, H100) >= gemm_model.estimate(big, BASE, H100)
    # 64 tiles on 132 SMs: splitting K across a pair fills twice the SMs, with no second kernel
    plain, k2 = (gemm_model.estimate(long_k, {**tile, **c}, H100) for c in ({}, {"cluster": "k2"}))
    split = gemm_model.estimate(long_k, {**tile, "split_k": 2}, H100)
    assert k2 > plain and k2 >= split
    # a configuration without the knob (it is not searched) gets no clustered rivals
    short_k = OP.space(OP.problem(m=8192, n=8192, k=256), H100)
    assert all("cluster" not in r for r in gemm_model.rivals(short_k, tile))
    assert {r["cluster"] for r in gemm_model.rivals(short_k, {**tile, "cluster": "n2"}) if r["block_k"] == 64} == {"off", "m2", "k2", "single"}
    # a best kernel of the template's other routes still gets valid clustered rivals
    square = dict(m=2048, n=4096, k=4096)
    best = {**tile, "cluster": "off", "schedule": "cooperative", "warp_specialize": "role_based", "tma": True,
            "epilogue": "smem", "num_stages": 3}
    clustered = [r for r in gemm_model.rivals(short_k, best) if r["cluster"] in ("m2", "n2")]
    assert len(clustered) == 2 and all(why(square, **r) is None for r in clustered)


@pytest.mark.nvcc
def test_a_tuned_cluster_kernel_exports(tmp_path, monkeypatch):
    """The best trial of a study over a sub-space with the knob (no epilogue or raster knob:
    their defaults) exports to an artifact whose library launches clusters."""
    from tilesearch.deploy import export
    from tilesearch.deploy.artifact import LIBRARY, SOURCE
    from tilesearch.space import Categorical, Space
    from tilesearch.testing.synthetic import SyntheticRunner
    from tilesearch.tuner import tune

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    config = {"block_m": 64, "block_n": 64, "block_k": 32, "num_stages": 2, "threads": 128, "panel_size": 0,
              "warp_policy": "square", "cluster": "m2"}
    problem = {"m": 256, "n": 256, "k": 128}
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    runner = SyntheticRunner(lambda c: 1.0, Target.from_arch("sm_90a", gpu="synthetic"))
    tune("gemm", problem, runner=runner, storage=storage, space=Space([Categorical(k, (v,)) for k, v in config.items()]),
         strategy="grid", trials=1, progress=False)
    meta = export("gemm", out=tmp_path / "kernel", storage=storage, **problem)
    assert meta.config == config
    assert "tma_load_multicast" in (tmp_path / "kernel" / SOURCE).read_text()
    assert b"tir.cluster_dim_y" in (tmp_path / "kernel" / LIBRARY).read_bytes()  # the launch's cluster shape


def test_the_probe_puts_tilelangs_wait_back_or_swaps_in_another():
    """scripts/cluster_probe.py's ``waits`` rewrite only the cluster kernels' stage-barrier waits."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "cluster_probe.py"
    spec = importlib.util.spec_from_file_location("cluster_probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    code = ('#include <tl_templates/cuda/barrier.h>\nextern "C" __global__ void gemm_cluster_kernel() {\n'
            "  ts_spin_wait(full[(g % 3)], ((g % 6) / 3));\n  ts_spin_wait(empty[(ko % 3)], 1);\n"
            "  red_bar[0].wait(0);\n}\n")
    back = probe.rewrite_waits(code, "tl")
    assert "full[(g % 3)].wait(((g % 6) / 3));" in back and "empty[(ko % 3)].wait(1);" in back
    assert "ts_spin_wait" not in back and "red_bar[0].wait(0);" in back
    test = probe.rewrite_waits(code, "test")
    assert test.index("test_wait") < test.index("__global__") and "ts_wait(full[(g % 3)], " in test
    plain = code.replace("gemm_cluster_kernel", "gemm_kernel")
    assert probe.rewrite_waits(plain, "tl") == plain  # the template's kernels are left alone
