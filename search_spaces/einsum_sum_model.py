"""What einsum-sum knows about its own performance: analytic cost-model features, for
:class:`~search_spaces.einsum_sum.EinsumSumOp`'s ``features`` hook.

Einsum-sum is bound by the bytes it moves far more than by its arithmetic: at t=k=8192, h=16,
d=128 it writes S once (256 MiB in float32) and reads Q (32 MiB) once per split of k, against
about 34 GFLOP that 16-bit tensor cores do in some 35 us. So the features describe what decides
how close a configuration comes to streaming S out at DRAM speed: how many times it reads Q and
K and whether it writes a workspace (the algorithm), how its blocks fill the SMs (waves, blocks
per SM from shared memory and threads), how long each block's walk over K is against its
prologue (the sum over h), and how many tile stores each block keeps in flight.

On the H100 sweep of every valid configuration at t=k=8192 (``experiments/data``, 2,922
configurations), tried before the operator used them (a script, since removed, that patched this hook; 10
seeds on the first 2,688): ``xgb`` reached 97% of the best row in a median of 16.5 trials with
these features, against 24 with the knob values alone and 23 for TPE. With :func:`roofline` also
as the cost model's prior (the ``estimate`` hook) it needed 39.5: the prior ranks the algorithms
about right (Spearman 0.56 against the measured throughput) but not the best configurations of
one, so it is a feature here, not the prior.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from search_spaces.einsum_sum import (
    TWO_KERNELS,
    WALKS_K,
    padded_d,
    pipelined_steps,
    s_element_bytes,
    smem_bytes,
)
from search_spaces.gemm_model import (
    DRAM_BALANCE,
    KERNEL_SECONDS,
    MAX_BLOCKS_PER_SM,
    MAX_THREADS_PER_SM,
    PEAK_TFLOPS,
)
from tilesearch.cost_model import log2_feature
from tilesearch.target import Target


def _sm_share(blocks: int, sms: int) -> float:
    """The share of the SMs' block rounds that do work: the last round leaves some idle."""
    return blocks / (sms * math.ceil(blocks / sms))


def _traffic(problem: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, float]:
    """Blocks launched, bytes through DRAM (L2 reuse of K ignored: K is small) and FLOPs of one
    call of ``config``."""
    t, k, h, d = problem["t"], problem["k"], problem["h"], problem["d"]
    dp = padded_d(d)
    out = s_element_bytes(problem.get("out_dtype", "float32"))
    algorithm = config["algorithm"]
    row_blocks = math.ceil(t / config["block_t"])
    k_tiles = math.ceil(k / config["block_k"])
    s_bytes, q_bytes, k_bytes = t * k * out, t * h * d * 2, k * d * 2
    workspace = 2 * (2 * t * dp * 2) if algorithm in TWO_KERNELS else 0  # hi and lo, written and read
    if algorithm in WALKS_K:
        split = min(config.get("k_split", 1), k_tiles)
        blocks = row_blocks * split
        q_reads = split if algorithm == "fused" else 1
        flops = 2 * 2.0 * t * k * dp  # hi and lo products
    else:
        blocks = row_blocks * k_tiles
        q_reads = k_tiles if algorithm == "direct" else 1
        flops = 2.0 * t * k * h * dp if algorithm == "direct" else 2 * 2.0 * t * k * dp
    moved = s_bytes + q_reads * q_bytes + row_blocks * k_bytes + workspace
    return {"blocks": blocks, "moved": moved, "s_bytes": s_bytes, "q_reads": q_reads, "flops": flops,
            "kernels": 2 if workspace else 1}


def _blocks_per_sm(problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> int:
    smem = smem_bytes(config, problem["d"], problem.get("out_dtype", "float32"))
    threads = config["threads"] + (128 if config.get("epilogue") == "specialized" else 0)
    return max(1, min((target.smem_per_block + 1024) // max(smem, 1), MAX_THREADS_PER_SM // threads, MAX_BLOCKS_PER_SM))


def roofline(problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> float:
    """Throughput relative to writing S once at DRAM speed, from a roofline over the bytes and
    FLOPs of :func:`_traffic`, slowed by the share of the SMs the last round of blocks leaves idle
    and by a second kernel's launch and tail."""
    got = _traffic(problem, config)
    peak = PEAK_TFLOPS.get(target.arch, 300.0) * 1e12
    bandwidth = peak / DRAM_BALANCE.get(target.arch, 200.0)
    sm_share = _sm_share(got["blocks"], target.num_sms)
    seconds = max(got["moved"] / bandwidth, got["flops"] / peak) / sm_share + (got["kernels"] - 1) * KERNEL_SECONDS
    return min(1.0, got["s_bytes"] / bandwidth / seconds)


def features(problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
    """Analytic features of one einsum-sum configuration on ``target``."""
    got = _traffic(problem, config)
    per_sm = _blocks_per_sm(problem, config, target)
    slots = target.num_sms * per_sm
    waves = got["blocks"] / slots
    full = math.ceil(waves)
    tile_bytes = config["block_t"] * config["block_k"] * s_element_bytes(problem.get("out_dtype", "float32"))
    steps = pipelined_steps(problem, config) if config["algorithm"] in WALKS_K else 1  # tiles of S each block writes
    prologue = problem["h"] * padded_d(problem["d"]) * 2 if config["algorithm"] == "fused" else 0  # bytes of Q per row
    if config["algorithm"] == "reduce_cluster":  # a tile per consumer group in a ping-pong
        in_flight = 2 if config.get("schedule") == "pingpong" else 1
    else:
        in_flight = config.get("store_buffers", 2) if config.get("epilogue") == "async" else 1
    return {
        "log2_blocks": log2_feature(got["blocks"]),
        "waves": waves,
        "wave_efficiency": got["blocks"] / (full * slots),
        "sm_efficiency": _sm_share(got["blocks"], target.num_sms),
        "blocks_per_sm": float(per_sm),
        "log2_moved_over_s": log2_feature(got["moved"] / got["s_bytes"]),
        "q_reads": float(got["q_reads"]),
        "log2_flops_per_byte": log2_feature(got["flops"] / got["moved"]),
        "kernels": float(got["kernels"]),
        "log2_walk_steps": log2_feature(steps),
        "prologue_share": prologue * config["block_t"] / (prologue * config["block_t"] + steps * tile_bytes),
        "log2_tile_store_bytes": log2_feature(tile_bytes),
        "stores_in_flight_kb": per_sm * in_flight * tile_bytes / 1024,
        "log2_roofline": log2_feature(roofline(problem, config, target)),
    }
