"""nvcc builds for sm_90a of GEMM configurations that use each knob beyond the tile shape."""

import re

import pytest

from search_spaces.gemm import DEFAULTS, GemmOp
from tilesearch.builder import LocalBuilder
from tilesearch.composite import Composite
from tilesearch.records import Candidate
from tilesearch.target import Target

pytestmark = pytest.mark.nvcc

H100 = Target.from_arch("sm_90a")
BASE = dict(block_m=128, block_n=128, block_k=64, num_stages=3, threads=256, panel_size=8, warp_policy="square",
            **DEFAULTS)
CASES = {
    "split_k": ((1024, 1024, 14336, "float16", "nn"), dict(split_k=4)),
    "split_k_cp_async_smem": ((100, 3000, 2000, "bfloat16", "nt"),
                              dict(split_k=2, tma=False, warp_specialize="off", epilogue="smem")),
    "persistent_smem": ((4100, 4000, 1032, "float16", "nt"), dict(persistent=True, epilogue="smem")),
    "persistent_column": ((4100, 4000, 1032, "bfloat16", "nn"), dict(persistent=True, raster="column")),
    "role_based": ((2048, 2048, 2048, "float16", "nn"), dict(block_n=256, warp_specialize="role_based")),
    "tma_store_unspecialized": ((2048, 2048, 2048, "bfloat16", "nn"), dict(warp_specialize="off", epilogue="smem")),
    "two_consumer_warp_groups": ((2048, 2048, 2048, "float16", "nn"), dict(block_m=256, warp_policy="full_row")),
    "swap_ab_split_k": ((16, 4096, 4096, "bfloat16", "nt"),
                        dict(block_m=16, block_n=64, block_k=128, threads=128, warp_policy="full_row", num_stages=8,
                             swap_ab=True, split_k=2)),
    "swap_ab_nn_smem": ((7, 1000, 999, "float16", "nn"),
                        dict(block_m=16, block_n=128, threads=128, warp_policy="full_row", swap_ab=True,
                             epilogue="smem")),
    "block_n_144": ((512, 4608, 3584, "float16", "nt"), dict(block_n=144, threads=256, warp_policy="full_row")),
    "edges_tma_store": ((784, 4000, 1032, "bfloat16", "nt"),
                        dict(block_m=256, block_n=128, warp_policy="full_row", epilogue="smem")),
    "edges_direct": ((784, 4000, 1032, "bfloat16", "nt"), dict(block_m=256, block_n=128, warp_policy="full_row")),
}


def candidate(name):
    (m, n, k, dtype, layout), knobs = CASES[name]
    return Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), {**BASE, **knobs}, H100)


@pytest.fixture(scope="module")
def sources():
    with LocalBuilder(workers=2, timeout=900) as builder:
        futures = {name: builder.submit(candidate(name)) for name in CASES}
        results = {name: f.result() for name, f in futures.items()}
    failed = {name: r.error for name, r in results.items() if not r.ok}
    assert not failed, failed
    op = GemmOp()
    out = {}
    for name in CASES:  # from TileLang's cache now
        c = candidate(name)
        out[name] = op.build(op.problem(**c.problem), c.config, H100).get_kernel_source()
    return out


def test_split_k_builds_a_gemm_and_a_reduction(sources):
    for name in ("split_k", "split_k_cp_async_smem"):
        assert sources[name].count("__global__ void __launch_bounds__") == 2
    assert "tma_load" in sources["split_k"] and "tma_load" not in sources["split_k_cp_async_smem"]


def test_persistent_loop_with_tma_store_epilogue_builds(sources):
    src = sources["persistent_smem"]
    assert "for (int w = 0; w < " in src and "tma_store" in src
    assert "for (int w = 0; w < " in sources["persistent_column"]


def test_lowering_switches_build(sources):
    assert "__launch_bounds__(384, 1)" in sources["role_based"]
    unspecialized = sources["tma_store_unspecialized"]
    assert "tma_store" in unspecialized and "tma_load" not in unspecialized and "warpgroup_reg_alloc" not in unspecialized


def test_256_thread_tiles_are_two_consumer_warp_groups_plus_a_producer(sources):
    # the registers constraint counts accumulators per consumer thread: 256 x 128 / 256 = 128
    src = sources["two_consumer_warp_groups"]
    assert "__launch_bounds__(384, 1)" in src and "warpgroup_reg_alloc<240>" in src and "float acc[128];" in src


def test_swapped_tiles_put_b_on_the_mma_rows_and_the_few_a_rows_on_its_columns(sources):
    import re

    # wgmma_ss<A, B, accumulator types, M, N, K, ...>: 64 rows of B per warp group, 16 rows of A
    for name in ("swap_ab_split_k", "swap_ab_nn_smem"):
        shapes = set(re.findall(r"wgmma_ss<[^>]*kFloat32, (\d+), (\d+), 16,", sources[name]))
        assert shapes == {("64", "16")}, shapes
    assert sources["swap_ab_split_k"].count("__global__ void __launch_bounds__") == 2  # GEMM and reduction
    assert "tma_store" in sources["swap_ab_nn_smem"]
    assert "float acc[72];" in sources["block_n_144"]  # 128 x 144 over two warp groups


SMEM_CASES = [  # (warp_specialize, split_k, persistent): the overlay cases of smem_bytes
    ("role_based", 2, False), ("role_based", 1, False), ("on", 2, False), ("on", 1, False), ("off", 1, False),
]


def test_shared_memory_model_matches_the_compiled_kernels():
    """Regression: the model overlaid the smem epilogue's tile on the operands under role-based warp
    specialization, where TileLang keeps them apart; the kernel (327680 B) failed at launch."""
    from tilelang import env

    from search_spaces.gemm import smem_bytes

    op, problem = GemmOp(), GemmOp().problem(m=2048, n=2048, k=2048, dtype="float16")
    base = {**BASE, "block_m": 256, "block_n": 128, "block_k": 128, "num_stages": 2, "epilogue": "smem"}
    env.disable_cache()  # a fresh compile keeps its lowered module, whose attributes say what it asks for
    try:
        for ws, sk, pe in SMEM_CASES:
            config = {**base, "warp_specialize": ws, "split_k": sk, "persistent": pe, "tma": True}
            kernel = op.build(problem, config, H100)
            compiled = kernel.launches[0].kernel if isinstance(kernel, Composite) else kernel  # split-K: its program
            device = compiled.artifact.device_mod
            asked = max(int(f.attrs.get("dyn_shared_memory_buf", 0)) for f in device.functions.values())
            assert smem_bytes(config, "float16") == asked, config
    finally:
        env.enable_cache()


def test_tiles_stored_through_tma_start_inside_the_tensor_at_its_edges(sources):
    # 784 = 3 x 256 + 16 and 4000 = 31 x 128 + 32: the last tile row starts at 784 - 256 = 528 and
    # the last tile column at 4000 - 128 = 3872, for the loads and the TMA store alike
    shifted = sources["edges_tma_store"]
    assert shifted.count("min((((int)blockIdx.y) * 256), 528)") >= 2, shifted
    assert shifted.count("min((((int)blockIdx.x) * 128), 3872)") >= 2
    # tiles stored from registers stay where they were: shifting them cost 1-2% and gained nothing
    assert "528" not in sources["edges_direct"] and "3872" not in sources["edges_direct"]


def test_a_run_time_m_split_k_stores_its_partial_sums_unguarded():
    # the workspace's rows are M rounded up to whole tiles: every tile's partial sums fit, so the
    # GEMM stores them without a bounds check (a run-time row count of their own cost one a store)
    c = candidate("swap_ab_split_k")
    op = GemmOp()
    source = op.build(op.problem(**c.problem), c.config, H100, runtime=("m",)).get_kernel_source()
    lines = source.splitlines()
    stores = [i for i, line in enumerate(lines) if re.match(r"\s*W\[", line)]
    assert stores, source
    assert not any(lines[i - 1].strip().startswith("if") for i in stores), source
