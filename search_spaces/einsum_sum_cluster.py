"""einsum-sum's ``reduce_cluster`` algorithm: reduce_first's hi/lo products as one GEMM of the GEMM
operator's cluster program (:mod:`search_spaces.gemm_cluster`).

Why: with Q summed over h, S is ``[hi | lo] @ K^T`` accumulated in float32, a GEMM with a
reduction of only ``2 x padded d`` (256 at d=128), whose time is writing S. That is where the
cluster program beat cuBLAS by 10% (8192x8192x256 bfloat16, RESULTS.md "Short K"): a persistent
loop whose two consumer warp groups take every other tile (ping-pong), so one group stores its
tile by TMA while the other computes, and a pair of blocks shares one operand by multicast.
einsum-sum's own walks overlap the stores less (49-67% of the write floor, H200, 2026-11-26).

- The reduce kernel writes hi and lo side by side, ``HiLo[t, 2 x dp]``
  (:func:`search_spaces.einsum_sum.reduce_program` with ``joined``);
- the GEMM reads ``HiLo`` as A and K as B, whose K tiles repeat for the lo half (``b_k=d``: no
  second copy of K), and writes S in ``out_dtype`` from its float32 accumulators.

The arithmetic is reduce_first's, so is its error (the same products, summed in another order).
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

from collections.abc import Mapping
from typing import Any

# reduce_cluster's knobs of its own (pinned for the other algorithms): which operand a pair of
# blocks shares, and how the two consumer warp groups split the work
CLUSTERS = ("n2", "m2")
SCHEDULES = ("pingpong", "cooperative")
PANEL = 0  # row-major over the tiles: hi/lo and K (a few MB) stay in L2 whatever the order


def warp_policy(config: Mapping[str, Any]) -> str:
    """Rows of warps where the tile is tall enough for every consumer warp group (64 rows each,
    a wgmma's height), else columns."""
    groups = 1 if config["schedule"] == "pingpong" else config["threads"] // 128
    return "full_row" if config["block_t"] >= 64 * groups else "full_col"


def gemm_program(t: int, k: int, d: int, dtype: str, out_dtype: str, dp: int, config: Mapping[str, Any],
                 num_sms: int) -> Any:
    """The second kernel: ``S = HiLo @ [K | K]^T`` by the persistent cluster program, ``config``'s
    ``block_t x block_k`` tiles of S, ``block_d`` columns of the reduction per stage."""
    from search_spaces.gemm_cluster import cluster_gemm_program

    c = config
    return cluster_gemm_program(
        t, k, 2 * dp, dtype, "nt", cluster=c["cluster"], block_m=c["block_t"], block_n=c["block_k"],
        block_k=c["block_d"], num_stages=c["num_stages"], threads=c["threads"], panel_size=PANEL,
        warp_policy=warp_policy(c), epilogue="smem", persistent=True, schedule=c["schedule"],
        num_sms=num_sms, out_dtype=out_dtype, b_k=d)


def smem_bytes(config: Mapping[str, Any], out_bytes: int) -> int:
    """The cluster program's shared memory (:func:`search_spaces.gemm.smem_bytes` of the same
    tile, S's elements ``out_bytes`` wide)."""
    from search_spaces import gemm

    c = config
    tile = {"block_m": c["block_t"], "block_n": c["block_k"], "block_k": c["block_d"],
            "num_stages": c["num_stages"], "cluster": c["cluster"], "schedule": c["schedule"],
            "epilogue": "smem", "persistent": True}
    return gemm.smem_bytes(tile, "float16", out_bytes)


def why_invalid(problem: Mapping[str, Any], config: Mapping[str, Any], dp: int) -> str | None:
    """Why ``config`` is no reduce_cluster kernel of ``problem`` (None if it is)."""
    from search_spaces.einsum_sum import s_element_bytes

    c = config
    if problem["d"] * 2 % 16 or problem["k"] * s_element_bytes(problem["out_dtype"]) % 16:
        return "algorithm: reduce_cluster loads K and stores S by TMA, which needs their rows 16-byte aligned"
    if dp % c["block_d"]:
        return f"block_d: reduce_cluster walks hi then lo, so block_d must divide the padded d={dp}"
    if c["num_stages"] < 2:
        return "num_stages: the cluster program's producer refills a stage only after it is released (2 or more)"
    if c["schedule"] == "pingpong" and c["threads"] != 256:
        return "schedule: ping-pong alternates two consumer warp groups (threads=256)"
    return None
