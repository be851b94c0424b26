"""The GEMM knobs beyond the tile shape: split-K, persistent tiles, smem epilogue, TMA and warp
specialization. Space and constraints, the rasterized tile order, the split-K callable, and what
TileLang lowers each knob to (lowering only: no nvcc, no GPU)."""

import pytest

from search_spaces.gemm import DEFAULTS, GemmOp, raster, rasterized, smem_bytes, workspace_shape
from tilesearch.space import Categorical, Space
from tilesearch.target import Target

H100 = Target.from_arch("sm_90a")
OLD = dict(block_m=128, block_n=128, block_k=64, num_stages=3, threads=256, panel_size=8, warp_policy="square")
op = GemmOp()


def space_of(m, n, k, **params):
    return op.space(op.problem(m=m, n=n, k=k, **params), H100)


def config(**knobs):
    return {**OLD, **DEFAULTS, **knobs}


def test_defaults_are_in_the_space_and_a_sub_space_without_new_knobs_still_works():
    space = space_of(8192, 8192, 8192)
    assert all(DEFAULTS[name] in space[name].values() for name in DEFAULTS)
    assert space.why_invalid(config()) is None
    old_only = Space([Categorical(k, (v,)) for k, v in OLD.items()], space.constraints)
    assert old_only.why_invalid(OLD) is None
    big = {**OLD, "block_n": 256, "block_k": 128, "num_stages": 4}
    reasons = [check(big) for check in old_only.constraints]
    assert reasons[0].startswith("shared memory") and not any(reasons[1:])


def test_swapped_tiles_and_deep_pipelines_are_offered_for_few_rows_only():
    decode, big = space_of(16, 4096, 4096), space_of(8192, 8192, 8192)
    assert decode["swap_ab"].values() == (False, True) and big["swap_ab"].values() == (False,)
    assert decode["block_m"].values()[0] == 16 and big["block_m"].values()[0] == 64
    assert decode["num_stages"].values()[-1] == 12 and big["num_stages"].values()[-1] == 5


def test_mid_size_m_offers_swapped_tiles_whose_heights_cover_m_in_a_few_tiles():
    """Between 257 and 4096 rows the A rows of a swapped tile (the MMA's N side) may be any
    multiple of 16 that covers M in a few tiles, as cuBLAS's tiles do (208 at 784 rows)."""
    from search_spaces.gemm import swap_heights

    assert swap_heights(784) == (144, 160, 208, 224) and swap_heights(2657) == (208, 224)
    mid, big = space_of(784, 6144, 4096, dtype="bfloat16", layout="nt"), space_of(8192, 8192, 8192)
    assert mid["swap_ab"].values() == (False, True) and mid["block_m"].values() == (64, 128, 144, 160, 208, 224, 256)
    assert big["block_m"].values() == (64, 128, 256)  # past 4096 rows as before
    tall = config(block_m=224, block_n=192, block_k=64, num_stages=4, threads=256, warp_policy="full_col",
                  swap_ab=True, epilogue="smem")
    assert mid.why_invalid(tall) is None  # 168 accumulators a thread: a swapped tile may hold 192
    assert mid.why_invalid({**tall, "swap_ab": False, "block_n": 128}).startswith(
        "block_m: 224 rows: unswapped tiles are 64, 128")
    # two warp groups of 104 columns: TileLang would issue N=8 MMAs
    assert "does not split into 2 MMAs" in mid.why_invalid({**tall, "block_m": 208})
    assert "block_n 192 is not a multiple of the warp groups' MMA rows (128)" in mid.why_invalid(
        {**tall, "block_m": 208, "warp_policy": "full_row"})
    assert mid.why_invalid({**tall, "block_m": 208, "block_n": 128, "warp_policy": "full_row"}) is None
    assert mid.why_invalid({**tall, "warp_policy": "square"}).startswith("swap_ab: the warp groups split")
    assert mid.why_invalid({**tall, "warp_specialize": "off", "tma": False}).startswith("registers: 168")
    assert mid.why_invalid({**tall, "block_m": 256, "block_n": 256, "num_stages": 2}).startswith("registers: 256")


def test_swapped_tile_constraints_say_why():
    decode = space_of(16, 4096, 4096)
    swapped = config(block_m=16, block_n=64, block_k=128, threads=128, warp_policy="full_row", swap_ab=True,
                     num_stages=8, panel_size=0)
    assert decode.why_invalid(swapped) is None
    assert decode.why_invalid({**swapped, "swap_ab": False}).startswith("block_m: 16 rows are fewer")
    assert decode.why_invalid({**swapped, "warp_policy": "square"}).startswith("swap_ab: the warp groups split")
    # two consumer warp groups stack along the swapped tile's block_n: 128 rows at least
    assert decode.why_invalid({**swapped, "threads": 256}) == \
        "swap_ab: block_n 64 is not a multiple of the warp groups' MMA rows (128)"
    assert decode.why_invalid({**swapped, "threads": 256, "block_n": 128, "num_stages": 4}) is None
    assert decode.why_invalid({**swapped, "num_stages": 12}).startswith("shared memory")  # 12 x 20 KB


def test_rasterization_panels_are_pruned_where_the_tiles_make_one_row():
    decode = space_of(16, 4096, 4096)
    swapped = config(block_m=16, block_n=64, block_k=128, threads=128, warp_policy="full_row", swap_ab=True,
                     num_stages=8)
    assert decode.why_invalid({**swapped, "panel_size": 0}) is None
    assert decode.why_invalid({**swapped, "panel_size": 8}).startswith("panel_size: one row of tiles")
    assert space_of(64, 4096, 4096).why_invalid({**swapped, "panel_size": 8}) is None  # 4 rows of 16


def test_column_raster_is_searched_only_when_asked_and_pruned_where_it_cannot_change_the_order(monkeypatch):
    import search_spaces.gemm as gemm

    assert space_of(8192, 4096, 2048)["raster"].values() == ("row",)  # not searched by default
    monkeypatch.setattr(gemm, "SEARCH_COLUMN_RASTER", True)
    assert space_of(16, 4096, 4096)["raster"].values() == ("row",)
    assert space_of(4096, 64, 4096)["raster"].values() == ("row",)
    big = space_of(8192, 4096, 2048)
    assert big["raster"].values() == ("row", "column")
    assert big.why_invalid(config(raster="column")) is None
    assert big.why_invalid(config(raster="column", panel_size=0)).startswith("raster: panel_size=0")
    narrow = space_of(8192, 200, 1024)
    assert narrow.why_invalid(config(raster="column", block_n=256)).startswith("raster: one column of tiles")
    assert narrow.why_invalid(config(raster="column", block_n=128)) is None  # two tile columns


def test_block_n_adds_the_widths_that_divide_n():
    assert space_of(8192, 8192, 8192)["block_n"].values() == (64, 128, 256)
    assert space_of(512, 4608, 3584)["block_n"].values() == (64, 96, 128, 144, 192, 256)
    assert space_of(2048, 14336, 4096)["block_n"].values() == (64, 112, 128, 224, 256)


def test_split_k_is_offered_only_where_output_tiles_leave_sms_idle():
    assert space_of(8192, 8192, 8192)["split_k"].values() == (1,)
    assert space_of(4097, 4095, 129)["split_k"].values() == (1,)
    assert space_of(1024, 1024, 14336)["split_k"].values() == (1, 2, 4, 8, 16)
    assert space_of(1000, 3000, 500)["split_k"].values() == (1, 2, 4)


def test_split_k_constraints_say_why():
    space = space_of(1024, 1024, 14336)
    assert space.why_invalid(config(split_k=2)) is None  # 64 tiles x 2 slices of 112 K tiles
    assert space.why_invalid(config(split_k=8, block_n=256)) is None
    assert space.why_invalid(config(split_k=16, block_n=256)) == "split-K: workspace 64 MiB > L2 50 MiB"
    assert space.why_invalid(config(split_k=4, block_m=64, block_n=64, threads=128)).startswith(
        "split-K: 256 output tiles already fill 132 SMs"
    )
    short = space_of(1024, 1024, 384)  # 6 K tiles of 64
    assert "fewer than 4 per slice" in short.why_invalid(config(split_k=2))
    assert short.why_invalid(config(split_k=2, block_k=32)) is None  # 12 K tiles of 32
    wide = space_of(2048, 2048, 65536)  # 128 x 256 tiles: 128 of them; 16 float32 slices of 2048^2
    assert "workspace 256 MiB > L2 50 MiB" in wide.why_invalid(config(split_k=16, block_n=256))
    assert workspace_shape(1000, 3000, 500, block_m=128, block_n=256, split_k=2) == (2, 1024, 3072)


def test_persistent_only_with_more_tiles_than_sms():
    assert space_of(16, 8192, 8192)["persistent"].values() == (False,)
    space = space_of(4096, 4096, 4096)
    assert space.why_invalid(config(persistent=True)) is None  # 1024 tiles
    assert space.why_invalid(config(persistent=True, block_m=256, warp_policy="full_row")) is None  # 512 tiles
    small = space_of(1024, 1536, 4096)  # 8 x 12 tiles of 128
    assert small.why_invalid(config(persistent=True)) == "persistent: 96 tiles fit in one wave over 132 SMs"


def test_the_persistent_loop_that_hung_is_pruned_and_its_neighbours_are_not():
    space = space_of(8192, 8192, 8192)
    hung = config(block_m=128, block_n=256, block_k=32, num_stages=2, persistent=True, warp_policy="full_col",
                  threads=256, epilogue="direct", warp_specialize="role_based")
    assert space.why_invalid(hung).startswith("persistent: a warp-specialized persistent loop with 2 stages")
    assert space.why_invalid({**hung, "warp_specialize": "on"}).startswith("persistent:")
    for change in ({"num_stages": 3}, {"epilogue": "smem"}, {"persistent": False}):
        assert space.why_invalid({**hung, **change}) is None, change


def test_lowering_switches_prune_combinations_that_give_the_same_kernel():
    space = space_of(4096, 4096, 4096)
    assert space.why_invalid(config(tma=False, warp_specialize="off")) is None
    assert space.why_invalid(config(tma=True, warp_specialize="off", epilogue="smem")) is None
    assert space.why_invalid(config(tma=True, warp_specialize="role_based")) is None
    for ws in ("on", "role_based"):
        assert space.why_invalid(config(tma=False, warp_specialize=ws)).startswith("warp specialization:")
    assert space.why_invalid(config(tma=True, warp_specialize="off")).startswith("tma:")


def test_tma_knobs_collapse_where_rows_are_not_16_byte_aligned():
    odd = space_of(4097, 4095, 129)  # rows of A, B and C: 258, 8190 and 8190 bytes
    assert odd.why_invalid(config(tma=False, warp_specialize="off")) is None
    assert odd.why_invalid(config()).startswith("warp specialization: rows of A and B")
    assert odd.why_invalid(config(warp_specialize="off", epilogue="smem")).startswith("tma: no operand")
    b_only = space_of(1000, 3000, 500)  # A rows 1000 bytes; B and C rows 6000 bytes
    assert b_only.why_invalid(config()) is None
    c_only = space_of(1000, 3000, 500, layout="nt")  # B is N x K: its rows are unaligned too
    assert c_only.why_invalid(config()).startswith("warp specialization")
    assert c_only.why_invalid(config(warp_specialize="off", epilogue="smem")) is None


def test_smem_epilogue_overlays_the_operand_buffers_except_in_the_persistent_loop():
    c = config(block_n=256, num_stages=4, epilogue="smem")
    operands = 4 * (128 * 64 + 64 * 256) * 2
    assert smem_bytes(c, "float16") == operands
    assert smem_bytes({**c, "num_stages": 1}, "float16") == 128 * 256 * 2
    assert smem_bytes({**c, "persistent": True}, "float16") == operands + 128 * 256 * 2
    assert smem_bytes({**c, "split_k": 2, "num_stages": 1}, "float16") == 128 * 256 * 4
    space = space_of(8192, 8192, 8192)
    assert space.why_invalid(c) is None
    assert space.why_invalid({**c, "persistent": True}).startswith("shared memory")


def test_pass_configs_carry_the_warp_specialization_knob():
    problem = op.problem(m=64, n=64, k=64)
    assert op.pass_configs(problem, config()) == {}
    assert op.pass_configs(problem, OLD) == {}
    assert op.pass_configs(problem, config(warp_specialize="off")) == {"tl.disable_warp_specialized": True}
    assert op.pass_configs(problem, config(warp_specialize="role_based")) == {
        "tl.enable_auto_warp_specialization": "role_based"
    }


def _row_raster(t, tiles_m, tiles_n, panel):
    """tl::rasterization2DRow<panel> from TileLang's threadblock_swizzle.h, in Python."""
    grid, span = tiles_m * tiles_n, panel * tiles_n
    offset, index = t % span, t // span
    stride = panel if index + 1 < -(-grid // span) else (grid - index * span) // tiles_n
    col = tiles_n - 1 - offset // stride if index & 1 else offset // stride
    return offset % stride + index * panel, col


@pytest.mark.parametrize("tiles_m,tiles_n,panel", [(64, 32, 8), (63, 12, 8), (5, 7, 8), (17, 3, 4), (9, 9, 0), (40, 1, 16)])
def test_persistent_tile_order_is_the_launch_order_of_the_plain_kernel(tiles_m, tiles_n, panel):
    import tilelang  # noqa: F401  (before TVM)
    import tvm

    analyzer = tvm.arith.Analyzer()
    order = []
    for t in range(tiles_m * tiles_n):
        m, n = raster(tvm.tirx.IntImm("int32", t), tiles_m, tiles_n, panel)
        order.append((int(analyzer.simplify(m)), int(analyzer.simplify(n))))
    expected = [_row_raster(t, tiles_m, tiles_n, panel) if panel else divmod(t, tiles_n) for t in range(len(order))]
    assert order == expected
    assert sorted(order) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)]


def _column_raster(t, tiles_m, tiles_n, panel):
    """tl::rasterization2DColumn<panel> from TileLang's threadblock_swizzle.h, in Python."""
    grid, span = tiles_m * tiles_n, panel * tiles_m
    offset, index = t % span, t // span
    stride = panel if index + 1 < -(-grid // span) else (grid - index * span) // tiles_m
    row = tiles_m - 1 - offset // stride if index & 1 else offset // stride
    return row, offset % stride + index * panel


@pytest.mark.parametrize("tiles_m,tiles_n,panel", [(64, 32, 8), (12, 63, 8), (7, 5, 8), (3, 17, 4), (9, 9, 0), (1, 40, 16)])
def test_persistent_column_order_is_the_launch_order_of_the_column_rasterized_kernel(tiles_m, tiles_n, panel):
    import tilelang  # noqa: F401  (before TVM)
    import tvm

    analyzer = tvm.arith.Analyzer()
    order = []
    for t in range(tiles_m * tiles_n):
        m, n = rasterized(tvm.tirx.IntImm("int32", t), tiles_m, tiles_n, panel, "column")
        order.append((int(analyzer.simplify(m)), int(analyzer.simplify(n))))
    expected = [_column_raster(t, tiles_m, tiles_n, panel) if panel else divmod(t, tiles_n) for t in range(len(order))]
    assert order == expected
    assert sorted(order) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)]


def _lowered(problem, knobs):
    import tilelang
    import tvm

    target = H100.tvm()
    c = config(**knobs)
    with tvm.transform.PassContext(config=op.pass_configs(problem, c)), target:
        return tilelang.lower(op.program(problem, c, H100), target=target).kernel_source


def test_each_knob_changes_the_lowered_kernel_as_intended():
    problem = op.problem(m=1000, n=3000, k=2000, dtype="bfloat16", layout="nt")
    plain = _lowered(problem, {})
    assert plain.count("__global__ void __launch_bounds__") == 1 and "tma_load" in plain
    assert "__launch_bounds__(384, 1)" in plain  # 256 consumer threads + a producer warp group
    split = _lowered(problem, dict(split_k=4, block_n=256))
    assert split.count("__global__ void __launch_bounds__") == 2 and "blockIdx.z" in split
    assert "float* __restrict__ W" in split
    persistent = _lowered(problem, dict(persistent=True))
    assert "for (int w = 0; w < 2; ++w)" in persistent  # 8 x 24 tiles over 132 blocks
    smem = _lowered(problem, dict(epilogue="smem"))
    assert "tma_store" in smem and "tma_store" not in plain
    assert "rasterization2DRow<8>" in plain
    column = _lowered(problem, dict(raster="column"))
    assert "rasterization2DColumn<8>" in column and "rasterization2DRow" not in column
    cp_async = _lowered(problem, dict(tma=False, warp_specialize="off"))
    assert "tma_load" not in cp_async and "cp_async" in cp_async and "__launch_bounds__(256, 1)" in cp_async
