"""The grouped GEMM tile program: one launch over every expert's output tiles.

The experts' row counts are problem parameters, so the tile-offset table is known when the
program is made: block ``b`` belongs to the last expert whose first tile is at or before ``b``.
That expert's index, first tile, first row and row count are sums of the comparisons
``b >= first_tile[e]`` over the experts (the table folded into the program, no lookup in memory);
experts with no rows have no tiles and are skipped by the same sums. An expert's last row tile
overhangs into the next expert's rows: those rows are loaded and multiplied, but never stored.
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

import math
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from search_spaces.gemm import gemm_warp_policy


def tile_table(sizes: Sequence[int], block_m: int, block_n: int, n: int) -> tuple[list[int], list[int]]:
    """First tile and first row of each expert, and one past the last (prefix sums)."""
    tiles_n = math.ceil(n / block_n)
    first_tile = [0, *accumulate(math.ceil(s / block_m) * tiles_n for s in sizes)]
    first_row = [0, *accumulate(sizes)]
    return first_tile, first_row


def grouped_gemm_program(
    sizes: Sequence[int],
    n: int,
    k: int,
    dtype: str = "bfloat16",
    *,
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 64,
    num_stages: int = 3,
    threads: int = 256,
    warp_policy: str = "square",
    raster: str = "m_fastest",
    epilogue: str = "direct",
) -> Any:
    """``Y[rows of e] = X[rows of e] @ W[e].T`` for every expert ``e`` (a TileLang ``PrimFunc``
    taking ``X [sum(sizes), k]``, ``W [experts, n, k]``, ``Y [sum(sizes), n]``).

    ``raster="m_fastest"`` walks an expert's row tiles first, so blocks running together share
    a tile of ``W`` (the large operand when experts have few rows); ``n_fastest`` shares a tile
    of ``X``. ``epilogue="smem"`` stages the output tile in shared memory before the masked store.
    """
    import tilelang.language as T

    policy = gemm_warp_policy(warp_policy)
    experts, total = len(sizes), sum(sizes)
    tiles_n = math.ceil(n / block_n)
    first_tile, first_row = tile_table(sizes, block_m, block_n, n)
    row_tiles = [math.ceil(s / block_m) for s in sizes]

    def of_expert(b: Any, values: Sequence[int]) -> Any:
        """``values[expert of block b]`` as a sum of steps at each expert's first tile."""
        expr = values[0]
        for e in range(1, experts):
            step = values[e] - values[e - 1]
            if step:
                expr = expr + T.if_then_else(b >= first_tile[e], step, 0)
        return expr

    @T.prim_func
    def grouped_gemm(
        X: T.Tensor((total, k), dtype),
        W: T.Tensor((experts, n, k), dtype),
        Y: T.Tensor((total, n), dtype),
    ):
        with T.Kernel(first_tile[-1], threads=threads) as b:
            x_s = T.alloc_shared((block_m, block_k), dtype)
            w_s = T.alloc_shared((block_n, block_k), dtype)
            acc = T.alloc_fragment((block_m, block_n), "float32")
            y_s = T.alloc_shared((block_m, block_n), dtype) if epilogue == "smem" else None
            # computed once per block into registers, not again in every step of the K loop
            e = T.alloc_var("int32", init=of_expert(b, list(range(experts))))
            local = T.alloc_var("int32", init=b - of_expert(b, first_tile[:-1]))
            start = T.alloc_var("int32", init=of_expert(b, first_row[:-1]))
            end = T.alloc_var("int32", init=start + of_expert(b, list(sizes)))
            div, mod = T.truncdiv, T.truncmod  # operands >= 0: no floor corrections
            if raster == "m_fastest":
                m_tiles = T.alloc_var("int32", init=of_expert(b, row_tiles))
                tm, tn = mod(local, m_tiles), div(local, m_tiles)
            else:
                tm, tn = div(local, tiles_n), mod(local, tiles_n)
            row0 = T.alloc_var("int32", init=start + tm * block_m)
            col0 = T.alloc_var("int32", init=tn * block_n)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=num_stages):
                T.copy(X[row0, ko * block_k], x_s)
                T.copy(W[e, col0, ko * block_k], w_s)
                T.gemm(x_s, w_s, acc, transpose_B=True, policy=policy)
            if epilogue == "smem":
                T.copy(acc, y_s)
                for i, j in T.Parallel(block_m, block_n):
                    if row0 + i < end and col0 + j < n:
                        Y[row0 + i, col0 + j] = y_s[i, j]
            else:
                for i, j in T.Parallel(block_m, block_n):
                    if row0 + i < end and col0 + j < n:
                        Y[row0 + i, col0 + j] = T.Cast(dtype, acc[i, j])

    return grouped_gemm
