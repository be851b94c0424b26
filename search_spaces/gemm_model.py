"""What GEMM knows about its own performance: analytic cost-model features, the roofline prior
Carver's recommendations and a configuration's rivals, which :class:`~search_spaces.gemm.GemmOp`
offers through the operator hooks (:meth:`~tilesearch.op.Operator.features`, ``estimate``,
``hints`` and ``rivals``).

The features describe how the tiles fill the GPU (tiles, waves over the SM count, last-wave
occupancy, shared memory and blocks per SM), how much data a tile reuses (arithmetic intensity),
the pipeline (K iterations against stages), the warp layout, the swizzle's L2 footprint and the
dtype. Other tile-GEMM-like operators (the grouped GEMM plugin) reuse :func:`warp_grid`,
:data:`MACHINE_BALANCE` and the occupancy limits.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from search_spaces.gemm_cluster import CHUNK, CLUSTERS
from tilesearch.cost_model import log2_feature
from tilesearch.op import Problem
from tilesearch.space import Config, Space
from tilesearch.target import Target

MMA_ROWS = 64  # rows of one warp group's MMA on Hopper: an unswapped tile needs block_m >= this
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536
MAX_BLOCKS_PER_SM = 32
CARVER_DEFAULTS = {"num_stages": 3, "panel_size": 8, "warp_policy": "square"}
"""Knob values a Carver hint leaves open are chosen as close to these as the space allows."""


def warp_grid(policy: str, warps: int, block_m: int, block_n: int, *, wgmma: bool = False) -> tuple[int, int]:
    """Warps along M and N that TileLang's warp policies give (``GemmWarpPolicy``'s partition).

    With ``wgmma`` (Hopper warp-group MMA: four warps stacked along M, 16 rows each) the warps
    go in groups of four: ``full_row`` puts as many groups along M as divide ``block_m``,
    ``full_col`` and ``square`` keep one group along M and the rest along N (``square`` scores
    the split by how close the per-warp aspect is to the tile's, and one group along M always
    wins). So with one warp group every policy is the same kernel, and with two ``square`` is
    ``full_col``. Without ``wgmma``: single warps, 16 rows by 8 columns each.
    """
    if wgmma and warps % 4 == 0:
        m_warps = 4
        if policy == "full_row":
            m_warps = next((c for c in range(warps, 3, -4) if block_m % (c * 16) == 0), 4)
        elif policy == "square":
            best = math.inf
            for c in range(4, min(warps, block_m // 16) + 1, 4):
                if warps % c or warps // c > block_n // 8:
                    continue
                score = abs((block_m / (c * 16)) / (block_n / (warps // c * 8)) - block_m / block_n)
                if score < best:
                    best, m_warps = score, c
        return m_warps, warps // m_warps
    if policy == "full_row":
        return warps, 1
    if policy == "full_col":
        return 1, warps
    best = (warps, 1)
    for wm in (d for d in range(1, warps + 1) if warps % d == 0):
        wn = warps // wm
        if block_m % wm or block_n % wn:
            continue
        if abs(block_m / wm - block_n / wn) < abs(block_m / best[0] - block_n / best[1]):
            best = (wm, wn)
    return best


# Peak 16-bit tensor-core FLOP/s over the bandwidth that feeds the SMs from L2, in FLOP per byte:
# a tile whose operand loads bring fewer FLOPs per byte than this waits on memory. H100 SXM:
# about 989 TFLOP/s dense over about 11 TB/s; A100: 312 TFLOP/s over about 5 TB/s. Rough figures:
# only the order they give to tile shapes of one problem matters, the model learns the rest.
MACHINE_BALANCE = {"sm_90": 90.0, "sm_90a": 90.0, "sm_80": 60.0, "sm_86": 60.0, "sm_89": 60.0}


# Peak 16-bit tensor-core FLOP/s over DRAM bandwidth, in FLOP per byte (H100 SXM: about 989
# TFLOP/s over 3.35 TB/s; A100: 312 over about 2 TB/s). Rough, like MACHINE_BALANCE.
DRAM_BALANCE = {"sm_90": 295.0, "sm_90a": 295.0, "sm_80": 160.0, "sm_86": 160.0, "sm_89": 160.0}


# Dense 16-bit tensor-core TFLOP/s (H100 SXM, A100), to turn a fixed cost in seconds into the
# estimate's units; DRAM bytes in flight at which DRAM delivers half its bandwidth, and the
# launch and tail of one more kernel: fitted to the H100's decode GEMMs (see _memory_time).
PEAK_TFLOPS = {"sm_90": 989.0, "sm_90a": 989.0, "sm_80": 312.0, "sm_86": 312.0, "sm_89": 312.0}
HALF_BANDWIDTH_BYTES = 1.8e6
KERNEL_SECONDS = 2.5e-6


def _is_hopper(target: Target) -> bool:
    return target.arch.startswith("sm_9")


def estimate(problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> float:
    """Throughput of a GEMM configuration relative to the GPU's peak, from a two-level roofline
    (an analytic prior for the cost model, not a prediction of its own).

    The busiest SM computes ``ceil(blocks / SMs)`` tiles, so the GPU does ``blocks / (SMs x
    ceil(blocks / SMs))`` of the work it could (quantization over SMs, not over occupancy slots:
    co-resident blocks share one SM's tensor cores); each tile runs at ``min(1, intensity /
    balance)`` of the SM's peak, ``intensity = block_m x block_n / (block_m + block_n)`` FLOP
    per byte of A and B brought in; work on the padding of edge tiles is wasted. Where moving
    the data through DRAM takes longer than that (:func:`_memory_time`), the data sets the pace.
    """
    m, n, k = problem["m"], problem["n"], problem["k"]
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    cluster = config.get("cluster", "off")
    # the cluster program's k2 splits K between a pair of blocks as split-K does, reducing in
    # shared memory; m2 and n2 bring the shared operand's tile in once for two blocks
    split = config.get("split_k", 1) * (2 if cluster == "k2" else 1)
    tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / bn)
    blocks = tiles_m * tiles_n * split
    sms = target.num_sms
    sm_share = blocks / (sms * math.ceil(blocks / sms))
    intensity = bm * bn / (bm * (0.5 if cluster == "n2" else 1.0) + bn * (0.5 if cluster == "m2" else 1.0))
    roofline = min(1.0, intensity / MACHINE_BALANCE.get(target.arch, 64.0))
    k_tiles = math.ceil(math.ceil(k / bk) / split) * split
    useful = (m * n * k) / (tiles_m * bm * tiles_n * bn * k_tiles * bk)
    compute = sm_share * roofline * useful
    return 1.0 / max(1.0 / compute, _memory_time(problem, config, blocks, target))


def _memory_time(problem: Mapping[str, Any], config: Mapping[str, Any], blocks: int, target: Target) -> float:
    """Time to move a GEMM's data through DRAM, in units of its time at peak FLOP/s: A and B
    read as often as the launch order brings them back from DRAM (:func:`operand_reads`), C
    written once, and split-K's float32 partial sums (one padded tile per output tile and K
    slice) written and read back, at the share of DRAM bandwidth that the bytes in
    flight draw (Little's law: the blocks resident at once, each with ``num_stages`` operand
    slices requested ahead, against :data:`HALF_BANDWIDTH_BYTES`); split-K's reduction adds a
    second kernel's launch and tail (:data:`KERNEL_SECONDS`).

    A decode GEMM (m=16, n=k=4096) moves 16 times more bytes than it has FLOPs for, so this
    term ranks its configurations, and tile intensity does not. On the H100 (``scripts/gemm_probe.py``,
    2026-11-24), among 16-row swapped tiles without split-K the time fell from 37.7 to 21.7 us as
    the bytes in flight rose from 1.7 to 6.6 MB (about ``17 us x (1 + 1.8 MB / in flight)``), and
    the best split-K configuration was 2.4 us behind the best without; earlier (trust round at
    ``cc19ce4``), 64x128 tiles with split-K 4 ran 6% faster than 64x256 with split-K 8 (same 128
    blocks, half the partial sums)."""
    m, n, k = problem["m"], problem["n"], problem["k"]
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    split, stages = config.get("split_k", 1), config.get("num_stages", 3)
    slice_bytes = (bm + bn) * bk * 2
    resident = min(blocks, target.num_sms * max(1, (target.smem_per_block + 1024) // max(stages * slice_bytes, 1)))
    reads_a, reads_b = operand_reads(problem, config, resident, target)
    moved = 2.0 * (m * k * reads_a + n * k * reads_b + m * n)
    if split > 1:
        moved += 2 * 4.0 * split * math.ceil(m / bm) * bm * math.ceil(n / bn) * bn
    in_flight = resident * stages * slice_bytes
    share = in_flight / (in_flight + HALF_BANDWIDTH_BYTES)
    at_peak = 2.0 * m * n * k / (PEAK_TFLOPS.get(target.arch, 300.0) * 1e12)  # seconds of the FLOPs at peak
    extra = KERNEL_SECONDS / at_peak if split > 1 else 0.0
    return moved * DRAM_BALANCE.get(target.arch, 200.0) / (2.0 * m * n * k) / share + extra


def features(problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
    """Analytic features of one GEMM configuration on ``target``."""
    m, n, k = problem["m"], problem["n"], problem["k"]
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    stages, threads, panel = config["num_stages"], config["threads"], config["panel_size"]
    esize = 2
    split = config.get("split_k", 1)
    tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / bn)
    tiles = tiles_m * tiles_n * split  # blocks: one per output tile and K slice
    smem = stages * (bm + bn) * bk * esize
    # with warp specialization TileLang adds a producer warp group to the consumer threads
    launched = threads + (128 if config.get("warp_specialize", "on") != "off" and config.get("tma", True) else 0)
    acc = bm * bn / threads
    regs = min(255, acc + 40)
    per_sm = min(
        (target.smem_per_block + 1024) // max(smem, 1),
        MAX_THREADS_PER_SM // launched,
        REGISTERS_PER_SM // int(launched * regs),
        MAX_BLOCKS_PER_SM,
    )
    per_sm = max(per_sm, 1)
    slots = target.num_sms * per_sm
    waves = tiles / slots
    full_waves = math.ceil(waves)
    last = (tiles - (full_waves - 1) * slots) / slots
    sm_rounds = math.ceil(tiles / target.num_sms)
    k_iters = math.ceil(math.ceil(k / bk) / split)
    warps = threads // 32
    swap = bool(config.get("swap_ab", False))
    mma_m, mma_n = (bn, bm) if swap else (bm, bn)  # a swapped tile's MMA rows are B's
    wgmma = _is_hopper(target) and mma_m >= 64
    wm, wn = warp_grid(str(config["warp_policy"]), warps, mma_m, mma_n, wgmma=wgmma)
    wtm, wtn = mma_m / wm, mma_n / wn
    groups_m = max(wm // 4, 1) if wgmma else wm
    group_m, group_n = mma_m / groups_m, mma_n / (wn if wgmma else 1)  # the tile of one MMA issuer
    column = column_panels(config)
    if column:  # panels of tile columns walked along M
        cols, rows = min(panel, tiles_n), min(tiles_m, math.ceil(slots / max(min(panel, tiles_n), 1)))
    elif panel:
        rows, cols = min(panel, tiles_m), min(tiles_n, math.ceil(slots / max(min(panel, tiles_m), 1)))
    else:
        rows, cols = math.ceil(min(slots, tiles) / tiles_n), min(slots, tiles_n)
    footprint = (rows * bm + cols * bn) * k * esize
    relative = estimate(problem, config, target)
    return {
        "is_bf16": float(problem.get("dtype") == "bfloat16"),
        "nt": float(problem.get("layout") == "nt"),
        "log2_flops": log2_feature(2.0 * m * n * k),
        "log2_tiles": log2_feature(tiles),
        "log2_tiles_m": log2_feature(tiles_m),
        "log2_tiles_n": log2_feature(tiles_n),
        "waves": waves,
        "full_waves": float(full_waves),
        "last_wave_occupancy": last,
        "wave_efficiency": tiles / (full_waves * slots),
        "sm_efficiency": tiles / (sm_rounds * target.num_sms),
        "tiles_per_sm": tiles / target.num_sms,
        "first_wave_sm_share": min(tiles, target.num_sms) / target.num_sms,
        "smem_kb": smem / 1024,
        "smem_share": smem / target.smem_per_block,
        "blocks_per_sm": float(per_sm),
        "warps_per_sm": float(per_sm * launched // 32),
        "acc_per_thread": acc,
        "tile_intensity": bm * bn / (bm + bn),
        "tile_aspect": log2_feature(bm / bn),
        "log2_k_iters": log2_feature(k_iters),
        "k_iters_per_stage": k_iters / stages,
        "stages_exceed_k": float(stages > k_iters),
        "k_in_flight": float((stages - 1) * bk),
        "pad_waste_mn": tiles_m * bm * tiles_n * bn / (m * n) - 1.0,
        "pad_waste_k": k_iters * bk * split / k - 1.0,
        "warp_tile_m": wtm,
        "warp_tile_n": wtn,
        "warp_tile_intensity": wtm * wtn / (wtm + wtn),
        "mma_tile_m": group_m,
        "mma_tile_n": group_n,
        "mma_tile_intensity": group_m * group_n / (group_m + group_n),
        "swizzle": float(panel > 0),
        "raster_column": float(bool(column)),
        "log2_wave_l2_share": log2_feature(footprint / target.l2_bytes),
        "bytes_per_flop": esize * (1 / bm + 1 / bn) / 2,
        "log2_estimate": log2_feature(relative),
    }


def carver_hints(problem: Problem, space: Space, target: Target, n: int = 8) -> list[Config]:
    """Up to ``n`` distinct valid configurations from Carver's matmul hints, best first: each hint
    becomes the valid configuration with its ``block_m x block_n`` (and the largest ``block_k``
    not above its reduction step) whose other knobs are closest to :data:`CARVER_DEFAULTS`."""
    from tilelang import carver

    from tilesearch.strategy.hints import carver_device

    template = carver.MatmulTemplate(
        M=problem["m"], N=problem["n"], K=problem["k"], in_dtype=problem["dtype"], accum_dtype="float32",
        out_dtype=problem["dtype"], trans_B=problem.get("layout") == "nt",
    ).with_arch(carver_device(target))
    valid = list(space.enumerate())
    out: list[Config] = []
    for hint in template.recommend_hints(topk=4 * n):
        bm, bn = (int(v) for v in hint.block[:2])
        rstep = int(hint.rstep[0]) if hint.rstep else 0
        same = [c for c in valid if c["block_m"] == bm and c["block_n"] == bn]
        ks = sorted({c["block_k"] for c in same if c["block_k"] <= rstep}) or sorted({c["block_k"] for c in same})
        if not same:
            continue
        pick = min((c for c in same if c["block_k"] == ks[-1]), key=lambda c: _distance(c, bm * bn))
        if pick not in out:
            out.append(pick)
        if len(out) == n:
            break
    return out


def _distance(config: Mapping[str, Any], tile: int) -> tuple:
    wanted = {**CARVER_DEFAULTS, "threads": 256 if tile >= 128 * 128 else 128}
    return tuple(config.get(k) != v for k, v in wanted.items())


REFIT_SHARE = 0.85
"""A refit's blocks keep at least this share of the SMs busy over their whole waves."""
SPLITS = (1, 2, 4, 8, 16)


def refits(problem: Mapping[str, Any], space: Space, target: Target, config: Mapping[str, Any], n: int,
           widths: Sequence[int]) -> list[Config]:
    """Up to ``n`` valid configurations with ``config``'s other knobs and another tile (``block_m``
    x ``block_n``, from ``widths``) and ``split_k``, whose blocks fill whole waves of the SMs (each
    at least :data:`REFIT_SHARE` busy), the fewest waves first: alternately the largest such tile
    without split-K and the largest with it (in rows M really has), each with as many of
    ``config``'s bytes in flight as its shared memory holds (:func:`_fitted`): a tile that loads
    fewer bytes a K step goes that much deeper. Tiles of 64 rows or more are offered as ``config``
    computes them (swapped or not), else the other way round, where that is valid.

    On an H200 (2026-11-27, ranges m=1..16384 in bfloat16, nt) three held-out sizes lost 15-31%
    to such tiles, none of which a tuned size's search or a probe had measured: at 235 rows of
    4096x4096 a 128x64 tile (2 x 64 = 128 blocks on 132 SMs) against the 128x128 tile (64
    blocks) that won at 128 and 430 rows; at 235 rows of 4096x14336 a 256x128 tile with 4-way
    split-K (1 x 32 x 4); at 21 rows of 4096x14336 a swapped 16x64 tile without split-K (2 x 64),
    where a 128x128 tile with split-K 4 served. Tiles shorter than :data:`MMA_ROWS` are offered
    swapped, as the space allows them only so. The analytic model (:func:`estimate`) ties the
    first with over 5,000 configurations, as the weights' bytes rank them all alike there.

    On four H100s (2026-11-28, ``925336d``) the probes' refits missed two such tiles by the
    knobs they kept. At 192 rows of 4096x4096 the 128x64 refit kept the 128x128 tile's K depth
    (128 x 3 stages), so it had two thirds of the bytes in flight; at 235 rows that tile was
    0.0296 ms 3 deep against 0.0267 ms 4 deep, and a 128x128 tile served 235 rows at 13.6%
    regret. At 183 rows of 6144x4096 the serving tile was swapped, and every tile that fills
    one wave (128x96: 2 x 64 blocks) was invalid swapped; unswapped, it won the 235-row search,
    where the range served it at 17.3% regret."""
    m, cols, sms = problem["m"], problem["n"], target.num_sms
    # below 64 rows only swapped tiles, where the space offers them; the space's other heights
    # (mid-size M: swapped tiles that cover M in a few tiles) as well
    heights = sorted({16, 32, 64, 128, 256} | set(space["block_m"].values()))
    fits: list[tuple[int, float, int, int, int]] = []
    for bm in heights:
        if bm // 2 >= m and bm > 16:
            continue  # a tile half as tall already holds every row
        for bn in widths:
            for split in SPLITS:
                blocks = math.ceil(m / bm) * math.ceil(cols / bn) * split
                waves = math.ceil(blocks / sms)
                if blocks / (waves * sms) >= REFIT_SHARE:
                    work = m / math.ceil(m / bm) * cols / math.ceil(cols / bn)  # a tile's share, padding left out
                    fits.append((waves, -work, split, -bm, bn))
    # the fewest waves first (the largest tiles may not fit a block, so all of them), then the
    # most work a tile, the fewest splits, the tallest (a short tile reads the weights more often)
    largest = sorted(fits)
    unsplit = [f for f in largest if f[2] == 1]
    own = (config["block_m"], config["block_n"], config.get("split_k", 1))
    depth = config["num_stages"] * config["block_k"] * (config["block_m"] + config["block_n"])

    def valid(order: list[tuple[int, float, int, int, int]]) -> Iterator[Config]:
        for _, _, split, minus_bm, bn in order:
            bm = -minus_bm
            if (bm, bn, split) == own:
                continue
            tile = {**config, "block_m": bm, "block_n": bn, "split_k": split}
            if bm < MMA_ROWS:  # the short tiles of decoding are swapped: the weights' rows split the warps
                routes = [{**tile, "swap_ab": True, "warp_policy": "full_row"}]
            else:  # as ``config`` computes it, else the other way round (a swapped 128x96 is invalid);
                # a tall swapped tile's warp groups may split its A rows instead (224x192)
                other = {**tile, "swap_ab": not tile.get("swap_ab", False), "warp_policy": "full_row"}
                routes = [tile, other, {**other, "warp_policy": "full_col"}]
            for route in routes:
                fitted = _fitted(space, route, depth // (bm + bn))
                if fitted is not None:
                    yield fitted
                    break

    out: list[Config] = []
    sources = [valid(unsplit), valid(largest)]
    while sources and len(out) < n:  # one from each in turn
        source = sources.pop(0)
        for fitted in source:
            if fitted not in out:
                out.append(fitted)
                sources.append(source)
                break
    return out


DEPTH_KEPT = 0.75
"""A refit keeps its K step where that reaches this share of the depth it should have."""


def _fitted(space: Space, config: Config, depth: int) -> Config | None:
    """``config`` as valid as it can be made with ``depth`` of K in flight (stages times K step),
    else less: as many stages of its K step, else fewer or a K step half or a quarter as wide
    (kept at two stages or more where it can be), with its thread count or the other one. Its own
    K step is kept while it reaches :data:`DEPTH_KEPT` of ``depth``: rounding 365 down to 5 x 64
    must not turn the tile into 11 stages of 32, a kernel with twice the loop trips that no
    search had measured."""
    found = []
    for threads in dict.fromkeys((config["threads"], 256 if config["threads"] == 128 else 128)):
        for bk in (config["block_k"], config["block_k"] // 2, config["block_k"] // 4):
            if bk < 16:
                continue
            for stages in range(max(1, depth // bk), 0, -1):
                candidate = {**config, "threads": threads, "block_k": bk, "num_stages": stages}
                if space.why_invalid(candidate) is None:
                    own_step = bk == config["block_k"] and stages * bk >= DEPTH_KEPT * depth
                    found.append((stages >= 2, own_step, stages * bk, threads == config["threads"], candidate))
                    break
    return max(found, key=lambda f: f[:4])[4] if found else None


FLIPPED_POLICY = {"full_row": "full_col", "full_col": "full_row"}


# The chunked rival's pipeline (see :func:`rivals`): the probe's 4 stages of 64 where the space's
# shared-memory check lets them fit beside the staging buffers, else the deepest that do (3 for
# 256-row tiles on sm_90: their buffers take 2 x 256 rows x 64 columns of its 227 KB)
CHUNKED_STEP, CHUNKED_STAGES = 64, (4, 3, 2)


def _chunked(space: Space, config: Config) -> Config | None:
    """``config`` with the chunked rival's deepest pipeline the space allows, else None. Its
    epilogue stores whole chunks of :data:`CHUNK` columns, so a best whose width is not a multiple
    of one is fitted to the nearest that is, the wider first: in a search of 2048 x 28672 x 4096
    (H100, 2026-12-07, model_shapes/suite_single_h100_2026-12-07) the best entered the polish at
    128x224, had no chunked rival, and the search ended at 0.953x cuBLAS, where the chunked
    program at 128x256 had run 0.986x in the call before."""
    width = config["block_n"]
    for block_n in sorted({-(-width // CHUNK) * CHUNK, width // CHUNK * CHUNK} - {0}, reverse=True):
        for stages in CHUNKED_STAGES:
            candidate = {**config, "block_n": block_n, "block_k": CHUNKED_STEP, "num_stages": stages}
            if space.why_invalid(candidate) is None:
                return candidate
    return None


def rivals(space: Space, config: Mapping[str, Any]) -> list[Config]:
    """The same tile by other routes, each several knobs from ``config``: the K step twice as
    wide and half as many stages deep (or half and twice), which keeps the bytes in flight; the
    same K step as deep as shared memory holds; and the tile transposed (block_m and block_n
    exchanged, the warps' split with them). On the H100 two 64-trial searches of 16x4096x4096
    settled on 64-wide K steps 12 deep and 128-wide 6 deep, 0.8% apart; of 4096^3 on 128x256 and
    256x128 tiles, 0.6% apart; neither had measured the other's kernel, and one-knob steps do not
    reach it. ``space`` fits the chunked rival's pipeline and the deepest one; the others may be
    invalid (the polish drops those)."""
    c = dict(config)
    found = []
    stages, bk = c["num_stages"], c["block_k"]
    if stages % 2 == 0:
        found.append({**c, "block_k": bk * 2, "num_stages": stages // 2})
    found.append({**c, "block_k": bk // 2, "num_stages": stages * 2})
    # the same K step as deep as shared memory holds: a search of 512 x 4608 x 3584 (H100,
    # 2026-12-07, model_shapes/suite_single_h100_2026-12-07) ended on 128x144x64 with 4 stages
    # at 0.900x cuBLAS, its polish spent on rivals and refits, where the same tile 5 deep had
    # been chosen at 0.978x (2026-12-06); one-knob steps come after the refits and were not reached
    deeper = [{**c, "num_stages": d} for d in space["num_stages"].values() if d > stages]
    deeper = [d for d in deeper if space.why_invalid(d) is None]
    if deeper:
        found.append(deeper[-1])
    if "cluster" in c:  # the cluster program, where the space offers it: the tile by the other routes
        # it loads by TMA and specializes its warp groups itself (warp_specialize=on): a best of
        # role_based had no valid clustered rival, and the H200 searches never timed the cluster
        # program at their best tile (where, at short K, probes then found it 1-6% ahead)
        program = {"tma": True, "warp_specialize": "on"} if c["cluster"] == "off" else {}
        if c.get("epilogue") != "chunked":
            # first: the single block's persistent loop storing 64 columns at a time, 1.035x cuBLAS
            # at 8192x8192x256 where the same tile's pairs ran 1.005x (H100, 2026-12-06,
            # scripts/cluster_probe.py set=chunked); the polish times its first few rivals. With the
            # probe's pipeline, 4 stages of 64 (at 128x256 the most that fit beside the staging
            # buffers), not the best's own: in searches that offered it at long K (H200, 2026-12-06,
            # model_shapes/single_vs_default_2026-12-06) the best's 2 stages of 128 and 5 of 32 made
            # it 0.63x and 0.86x, where the probe's ran 0.994-0.998x at the same shapes' tile
            chunked = _chunked(space, {**c, **program, "cluster": "single", "persistent": True,
                                       "epilogue": "chunked", "warp_policy": "full_row"})  # its only policy
            if chunked is not None:
                found.insert(0, chunked)
        if c["cluster"] != "off" and "schedule" in c:
            # at K of 512 and 1024 ping-pong was 6-8% ahead of cooperative at the same tile (m2 and
            # n2), at 2048 2-3% (H200, scripts/cluster_probe.py set=short_k). Second, after the
            # chunked rival: the polish times only its first few, and an H100 search of
            # 8192x8192x256 (bf16, nt, 40 trials) chose 128x128x64 n2 cooperative at 0.939x cuBLAS
            # where the same tile ping-pong ran 1.038x [1.032, 1.044], the schedule rival seventh in
            # line (H100, 2026-12-07, experiments/results/fast/main_2026-12-07, knob_ablation.json)
            flip = {**c, "schedule": "pingpong" if c["schedule"] == "cooperative" else "cooperative"}
            found.insert(1 if found and found[0].get("epilogue") == "chunked" else 0, flip)
        found += [{**c, **program, "cluster": other} for other in CLUSTERS if other != c["cluster"]]
    if not c.get("swap_ab", False) and c["block_m"] != c["block_n"]:
        flipped = {**c, "block_m": c["block_n"], "block_n": c["block_m"]}
        found.append(flipped)
        if c.get("warp_policy") in FLIPPED_POLICY:
            found.append({**flipped, "warp_policy": FLIPPED_POLICY[c["warp_policy"]]})
    return found


def column_panels(config: Mapping[str, Any]) -> bool:
    """Whether the launch walks panels of tile columns along M (``raster=column``; without panels
    the order is row-major whatever ``raster`` says)."""
    return bool(config.get("panel_size", 0)) and config.get("raster", "row") == "column"


def operand_reads(problem: Mapping[str, Any], config: Mapping[str, Any], resident: int,
                  target: Target) -> tuple[float, float]:
    """How many times A and B come through DRAM: once, unless the operand is larger than half
    the L2 and the launch order returns to it after it left. A row panel (``raster=row``) of
    ``h`` tile rows walks along N: the blocks of its rows share each tile of B while it is in L2,
    and the walk brings B in again for every panel, ``ceil(tiles_m / h)`` times; A's panel rows
    stay hot through the walk. A column panel is the reverse. Without panels (``panel_size=0``)
    the row-major launch keeps as many tile rows together as the resident blocks span.

    On four H200s (2026-11-28, ``14cc9b0``) a 14336x4096 range served 65 rows with a 64x112
    tile launched row-major (best at 64 rows, 0.041 ms) and took 0.0695 ms, 61.7% behind the
    best at 65: the second tile row read B's 117 MB again. Read once, the model drew that tile
    flat past 64 rows and put the edge to the next bucket's paneled tile at 69, not 64."""
    m, n, k = problem["m"], problem["n"], problem["k"]
    tiles_m, tiles_n = math.ceil(m / config["block_m"]), math.ceil(n / config["block_n"])
    panel = config.get("panel_size", 0)
    half_l2 = target.l2_bytes / 2

    def passes(tiles: int, across: int, operand_bytes: float) -> float:
        # tiles: the tile rows (or columns) that reread the operand; across: tiles in one of them
        if operand_bytes <= half_l2:
            return 1.0
        together = max(panel, 1, resident // max(across, 1))
        return float(math.ceil(tiles / together))

    if column_panels(config):
        return passes(tiles_n, tiles_m, 2.0 * m * k), 1.0
    return 1.0, passes(tiles_m, tiles_n, 2.0 * n * k)
