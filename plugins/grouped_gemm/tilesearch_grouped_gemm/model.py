"""What the grouped GEMM knows about its performance: cost-model features and a roofline prior.

It is GEMM's model (``search_spaces/gemm_model.py``: tiles over SMs, tile intensity against the
machine balance, occupancy, warp layout) over the tiles of all experts together, plus what
grouping adds: the rows wasted in each expert's last row tile, and how much of the weights one
wave of blocks reads, which the ``raster`` order decides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from search_spaces.gemm_model import (
    MACHINE_BALANCE,
    MAX_BLOCKS_PER_SM,
    MAX_THREADS_PER_SM,
    REGISTERS_PER_SM,
    warp_grid,
)
from tilesearch.cost_model import log2_feature
from tilesearch.target import Target


def _tiles(sizes: Sequence[int], problem: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[int, int, int]:
    """Row tiles of all experts, column tiles, K tiles."""
    row_tiles = sum(math.ceil(s / config["block_m"]) for s in sizes)
    return row_tiles, math.ceil(problem["n"] / config["block_n"]), math.ceil(problem["k"] / config["block_k"])


def estimate(sizes: Sequence[int], problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> float:
    """Throughput relative to the GPU's peak: the share of SMs the tiles keep busy, times the tile's
    intensity over the machine balance (at most 1), times the useful share of the padded work."""
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    row_tiles, col_tiles, k_tiles = _tiles(sizes, problem, config)
    blocks = row_tiles * col_tiles
    sms = target.num_sms
    sm_share = blocks / (sms * math.ceil(blocks / sms))
    roofline = min(1.0, bm * bn / (bm + bn) / MACHINE_BALANCE.get(target.arch, 64.0))
    useful = sum(sizes) * problem["n"] * problem["k"] / (row_tiles * bm * col_tiles * bn * k_tiles * bk)
    return sm_share * roofline * useful


def features(sizes: Sequence[int], problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
    """Analytic features of one configuration on ``target``."""
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    stages, threads = config["num_stages"], config["threads"]
    row_tiles, col_tiles, k_tiles = _tiles(sizes, problem, config)
    blocks = row_tiles * col_tiles
    smem = stages * (bm + bn) * bk * 2 + (bm * bn * 2 if config["epilogue"] == "smem" else 0)
    launched = threads + 128  # TileLang's producer warp group under its warp specialization
    regs = min(255, bm * bn / threads + 40)
    per_sm = max(1, min((target.smem_per_block + 1024) // max(smem, 1), MAX_THREADS_PER_SM // launched,
                        REGISTERS_PER_SM // int(launched * regs), MAX_BLOCKS_PER_SM))
    slots = target.num_sms * per_sm
    waves = blocks / slots
    wm, wn = warp_grid(str(config["warp_policy"]), threads // 32, bm, bn, wgmma=target.arch.startswith("sm_9") and bm >= 64)
    active = [s for s in sizes if s]
    # weights one wave reads: m_fastest keeps a wave on few column tiles of few experts
    experts_per_wave = min(len(active), max(1.0, slots / max(blocks / max(len(active), 1), 1)))
    if config["raster"] == "m_fastest":
        cols_per_wave = min(col_tiles, math.ceil(slots / max(row_tiles / max(len(active), 1), 1)))
    else:
        cols_per_wave = col_tiles
    w_wave = experts_per_wave * cols_per_wave * bn * problem["k"] * 2
    return {
        "log2_tokens_per_expert": log2_feature(sum(sizes) / max(len(active), 1)),
        "active_experts": float(len(active)),
        "row_pad_waste": row_tiles * bm / max(sum(sizes), 1) - 1.0,
        "col_pad_waste": col_tiles * bn / problem["n"] - 1.0,
        "k_pad_waste": k_tiles * bk / problem["k"] - 1.0,
        "log2_blocks": log2_feature(blocks),
        "waves": waves,
        "last_wave_occupancy": (blocks - (math.ceil(waves) - 1) * slots) / slots,
        "sm_efficiency": blocks / (math.ceil(blocks / target.num_sms) * target.num_sms),
        "smem_share": smem / target.smem_per_block,
        "blocks_per_sm": float(per_sm),
        "tile_intensity": bm * bn / (bm + bn),
        "k_iters_per_stage": k_tiles / stages,
        "warp_tile_intensity": (bm / wm) * (bn / wn) / (bm / wm + bn / wn),
        "log2_wave_weight_l2_share": log2_feature(w_wave / target.l2_bytes),
        "is_bf16": float(problem.get("dtype") == "bfloat16"),
        "log2_estimate": log2_feature(estimate(sizes, problem, config, target)),
    }

