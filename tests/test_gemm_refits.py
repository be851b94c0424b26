"""GEMM's refits: the tiles a range's probe times where the tuned sizes' tiles leave SMs idle."""

import math

from search_spaces import gemm_model
from tilesearch.registry import load
from tilesearch.target import Target

TILE = dict(block_k=128, block_m=128, block_n=128, epilogue="smem", num_stages=3, panel_size=0, persistent=False,
            raster="row", split_k=1, swap_ab=False, threads=256, tma=True, warp_policy="square",
            warp_specialize="role_based")


def _refits(m, n, k, config, count=4):
    op, target = load("gemm"), Target.from_arch("sm_90a")
    problem = op.problem(m=m, n=n, k=k, dtype="bfloat16", layout="nt")
    space = op.space(problem, target)
    return op.refits(problem, space, target, config, count), space, target


def _blocks(m, n, c):
    return math.ceil(m / c["block_m"]) * math.ceil(n / c["block_n"]) * c["split_k"]


def test_refits_fill_the_sms_where_the_serving_tile_leaves_half_of_them_idle():
    """At 235 rows of 4096x4096 the 128x128 tile that won at 128 and 430 rows runs 64 blocks on
    132 SMs; on an H200 a held-out search found a 128x64 tile (128 blocks) 31% faster, and at
    235 rows of 4096x14336 a 256x128 tile with 4-way split-K (128 blocks)."""
    found, space, target = _refits(235, 4096, 4096, TILE)
    assert len(found) == 4 and TILE not in found and len({str(sorted(c.items())) for c in found}) == 4
    for c in found:
        assert space.why_invalid(c) is None
        blocks = _blocks(235, 4096, c)
        assert blocks / (target.num_sms * math.ceil(blocks / target.num_sms)) >= gemm_model.REFIT_SHARE
    tiles = {(c["block_m"], c["block_n"], c["split_k"]) for c in found}
    assert (128, 64, 1) in tiles and (256, 128, 4) in tiles
    first = found[0]  # unsplit first, with the serving tile's other knobs
    assert first["split_k"] == 1 and first["warp_specialize"] == "role_based" and first["epilogue"] == "smem"


def test_refits_of_a_decode_tile_and_of_a_large_problem():
    """21 rows of 4096x14336: a swapped 16x64 tile without split-K (2 x 64 = 128 blocks) beat the
    swapped 16x128 split-K 4 tile that won at 1 row. At 8928 rows of 14336x4096 the largest tiles
    do not fit a block; the 128x256 tile a held-out search chose there comes first."""
    decode = dict(TILE, block_m=16, block_n=128, split_k=4, swap_ab=True, warp_policy="full_row", num_stages=6,
                  epilogue="direct")
    found, _, _ = _refits(21, 4096, 14336, decode)
    assert (found[0]["block_m"], found[0]["block_n"], found[0]["split_k"]) == (16, 64, 1) and found[0]["swap_ab"]
    # from the unswapped 128x128 split-K 4 tile that served 15..144 rows: short tiles come swapped
    served = dict(TILE, split_k=4, warp_policy="full_row", epilogue="direct")
    found, space, _ = _refits(19, 4096, 14336, served)
    first = found[0]
    assert (first["block_m"], first["block_n"], first["split_k"], first["swap_ab"]) == (16, 64, 1, True)
    assert first["warp_policy"] == "full_row" and all(space.why_invalid(c) is None for c in found)
    large = dict(TILE, block_m=256, block_n=128, block_k=64, persistent=True, warp_specialize="on",
                 warp_policy="full_row")
    found, _, _ = _refits(8928, 14336, 4096, large, 2)
    assert len(found) == 2 and (found[0]["block_m"], found[0]["block_n"]) == (128, 256)
    # as many bytes in flight as shared memory holds, never more than the serving tile's
    assert all(_in_flight(c) <= _in_flight(large) for c in found)


def _in_flight(c):
    """Elements of A and B a block has in flight: stages x K step x (rows + columns)."""
    return c["num_stages"] * c["block_k"] * (c["block_m"] + c["block_n"])


def test_a_narrower_refit_goes_deeper_with_the_same_bytes_in_flight():
    """On four H100s the 128x64 refit of the 128x128 tile (K step 128, 3 stages) kept its K
    depth, two thirds of its bytes in flight: at 235 rows of 4096x4096 that tile took 0.0296 ms
    3 deep and 0.0267 ms 4 deep, and the range served 235 rows with the 128x128 tile at 13.6%
    regret. Narrowed to 192 columns of A and B a K step, it goes 4 deep with its own K step."""
    found, _, _ = _refits(192, 4096, 4096, TILE)
    narrow = next(c for c in found if (c["block_m"], c["block_n"], c["split_k"]) == (128, 64, 1))
    assert (narrow["block_k"], narrow["num_stages"]) == (128, 4) and _in_flight(narrow) == _in_flight(TILE)


def test_a_swapped_serving_tile_is_refitted_unswapped_where_only_that_is_valid():
    """At 183 rows of 6144x4096 a swapped 64x192 split-K 2 tile served; the tile that fills one
    wave there, 128x96 (2 x 64 blocks), is invalid swapped (96 columns are not a multiple of the
    MMA's 64 rows), so no refit filled the SMs. Unswapped it won the 235-row search by 17%.
    It keeps its K step: 5 x 64 rather than 11 stages of 32 (its depth is 365 of K)."""
    served = dict(TILE, block_m=64, block_n=192, block_k=64, num_stages=5, split_k=2, swap_ab=True, threads=128,
                  warp_policy="full_row", epilogue="direct")
    found, space, _ = _refits(183, 6144, 4096, served)
    first = found[0]
    assert (first["block_m"], first["block_n"], first["split_k"], first["swap_ab"]) == (128, 96, 1, False)
    assert (first["block_k"], first["num_stages"]) == (64, 5) and all(space.why_invalid(c) is None for c in found)
    assert space.why_invalid(dict(first, swap_ab=True)) is not None  # the serving route is invalid for it

