"""GEMM: ``C = A @ B`` (``layout=nn``, B is K x N) or ``C = A @ B.T`` (``layout=nt``, B is N x K).

float16 or bfloat16 inputs, float32 accumulation, output in the input dtype, any M, N, K >= 1.
The template is TileLang's pipelined Hopper GEMM: a block computes a ``block_m x block_n`` tile,
staging ``block_k``-wide slices of A and B through shared memory ``num_stages`` deep; blocks are
rasterized in panels of ``panel_size`` (0: row-major launch order). Edges that are not multiples
of a tile are predicated by TileLang's copies, or, for tiles stored through TMA, covered by a last
tile shifted back inside the tensor (:func:`tile_start`).

Knobs beyond the tile shape (each defaults to the plain template, so a sub-space without them
compiles the same kernel as before they existed):

- ``split_k``: K is cut into ``split_k`` slices computed by separate blocks, which write float32
  partial tiles to a workspace; a second kernel in the same program sums them into C. For small
  M x N with long K, where the output tiles alone leave SMs idle.
- ``persistent``: ``min(tiles, SMs)`` blocks loop over the tiles in the rasterized order instead
  of one block per tile.
- ``epilogue``: ``direct`` stores the accumulators from registers; ``smem`` stages the tile in
  shared memory first (TileLang then writes it with ``stmatrix`` and a TMA store); ``chunked``,
  the cluster program's alone, stages and stores it 64 columns at a time.
- ``tma``: TMA bulk copies (or ``cp.async`` when off) for the operand loads and the smem epilogue.
- ``swap_ab``: the block computes its tile transposed, ``C^T = B^T A^T``, so that the tile's
  ``block_m`` rows of A are the N side of the warp-group MMA (as few as 16) and its ``block_n``
  columns the M side (64 rows per warp group). Hopper's MMA has at least 64 rows per warp group, so
  an unswapped tile of a 16-row decode GEMM spends three quarters of its MMA work on padding and
  holds a 64-row accumulator; swapped, a 16 x 128 tile holds 16 accumulators a thread and the
  whole block streams the weight rows. Offered where M is small; the accumulator is written
  transposed, through shared memory with ``epilogue=smem``.
- ``raster``: how the panels run: ``row`` (panels of ``panel_size`` tile rows, walked along N,
  TileLang's ``rasterization2DRow``, the plain template's) or ``column`` (panels of tile columns,
  walked along M). Blocks that run at once share what they read through L2; which operand they
  share is the order's choice: a row panel keeps a few tile rows of A hot while B streams past,
  a column panel the reverse, the better where A is the larger operand (N much less than M) or
  where B's tiles are the ones read by the most blocks. Pruned where it cannot change the order
  (``panel_size=0``, one tile column). Not searched by default (:data:`SEARCH_COLUMN_RASTER`).
- ``cluster``: ``off``, or pairs of blocks in a thread-block cluster that load their shared
  operand once and receive it both through TMA multicast: ``m2`` pairs two tile rows (sharing
  B's tile), ``n2`` two tile columns (sharing A's); ``k2`` splits K between the two and reduces
  through shared memory (split-K without a second kernel). A program of its own, with its producer and
  consumer warp groups and its barriers written out (:mod:`search_spaces.gemm_cluster` says why);
  with ``persistent`` its producer loads the next tile while the consumers store this one.
  ``single`` is the same program in one block, without a partner. Offered where K is short and
  the tiles many (:func:`short_k_clusters`), with ``schedule`` (cooperative or ping-pong) and the
  ``chunked`` epilogue; elsewhere not searched by default (:data:`SEARCH_CLUSTER`).
- ``stream_k``: 1 (off), or a persistent program whose last, partial wave of tiles is spread
  over every SM in K, at most ``stream_k`` blocks to a tile, and fixed up inside the kernel
  (:mod:`search_spaces.gemm_stream_k` says why and how): for sizes whose tiles fill a few waves
  and a fraction. Not searched by default (:data:`SEARCH_STREAM_K`).
- ``warp_specialize``: TileLang's producer/consumer split of the pipeline: ``on`` (its
  ``WarpSpecialized`` pass, the default), ``role_based`` (its newer automatic scheduler) or
  ``off``. With it on, ``threads`` counts the consumer threads and TileLang adds a producer warp
  group: ``threads=256`` launches 384 threads, two consumer warp groups and a producer.
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from search_spaces import gemm_cluster, gemm_model, gemm_stream_k
from search_spaces.gemm_cluster import CLUSTERS, SCHEDULES, cluster_gemm_program
from search_spaces.gemm_model import MMA_ROWS
from search_spaces.gemm_stream_k import STREAM_K, stream_k_gemm_program
from tilesearch.composite import Composite, Dim, Launch, Workspace
from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.space import Categorical, Config, IntRange, PowerOfTwo, Space
from tilesearch.target import Target

DTYPES = ("float16", "bfloat16")
LAYOUTS = ("nn", "nt")
WARP_POLICIES = ("square", "full_row", "full_col")
WARP_SPECIALIZE = ("on", "role_based", "off")
EPILOGUES = ("direct", "smem")
# where the space offers the cluster program, its epilogue that stores 64 columns at a time too
CLUSTER_EPILOGUES = (*EPILOGUES, "chunked")
# the programs offered where K is short (:func:`short_k_clusters`): not k2, which splits the K of
# tiles that leave SMs idle (none there)
SHORT_K_CLUSTERS = ("off", "m2", "n2", "single")
# the programs TILESEARCH_CLUSTER=single offers where K is long (:data:`SEARCH_SINGLE`), cooperative
# alone: the single block's ping-pong (128x128, 5 stages) was 5-10% behind its cooperative loop there
SINGLE_CLUSTERS = ("off", "single")
RASTERS = ("row", "column")
# Whether the search turns ``raster``. Off: on 13 kernels the searches chose (H100, 2026-11-24,
# RESULTS.md "Round 4") the column order gained nothing beyond the interval and lost 2-4% on four,
# and with the knob in the space the README's TPE command ran into 207 invalid proposals (19
# without) and a kernel 4% slower. The template, its constraints and the persistent loop's order
# keep it: a space may add it (``scripts/knob_ablation.py values=row,column``).
SEARCH_COLUMN_RASTER = False
# Whether the search turns ``cluster``. Measured on an H200 (2026-11-26, RESULTS.md): every case
# of tests/test_gemm_cluster.py correct against float64, and two pairs of searches of three model
# shapes with and without it: in one, the short-K square went from 0.959x to 1.002x cuBLAS (a
# clustered persistent kernel, 4.6% ahead of the template's kernel of the same tile in the same
# re-time); in the other the search did not find that kernel (0.909x both ways) and lost 1.9% on
# a long-K shape to the trials it spent on clustered kernels. Where K is long the paired programs
# are behind the template at the same tile (scripts/cluster_probe.py), so it stays off by default.
# The single block's persistent loop with the chunked epilogue was 0.8-4% ahead of the template at
# its tile on an H100 (2026-12-06, set=chunked) at four long-K shapes. TILESEARCH_CLUSTER=single
# offers that program alone (cluster off or single, with the chunked epilogue) to a search. Two
# searches of three long-K shapes with it and without (H200, 2026-12-06, RESULTS.md) chose template
# kernels alike (0.973 and 0.974 geometric mean): their polish's chunked rival took the best's
# pipeline, not the probe's (since de98942 it takes the probe's). Searched again on an H100
# (2026-12-07): 0.995 against 0.971 at those shapes, but in the whole suite a call later it was not
# reached at one of them, cost 8% at 512 x 4608 x 3584, and README's TPE command took 25-29 s with
# it and chose a slower kernel in one of two runs; so it stays behind the variable, its other forms
# pruned where K is long (the ``pairs`` constraint), and offered only where the largest tiles
# outnumber the SMs (:func:`single_has_next_tile`). Again at 99e0f8c (H100, 2026-12-07, night):
# 1.015 against 0.986 over the suite's six shapes, the long-K three at 0.991-1.001x; README's TPE
# command 26.6 and 33.0 s with it against 23.8-24.6 s, and one of its two runs chose a kernel at
# 0.797x, where the default chose trial 46 at 1.000x both times.
# TILESEARCH_CLUSTER=1 offers every program to the search in every process of a run. While it is off
# the knob is not in the space at all (a configuration without it is not clustered): a constant knob
# would still add a feature column, and with it reshuffle the cost model's column sampling on every
# recorded dataset.
SEARCH_CLUSTER = os.environ.get("TILESEARCH_CLUSTER") == "1"
SEARCH_SINGLE = os.environ.get("TILESEARCH_CLUSTER") == "single"
# Where K is short and the tiles fill SMs a few times over, the space offers it all the same
# (pairs, cooperative or ping-pong; :func:`short_k_clusters`). There a tile's main loop is a few
# K steps and its stores of C as long, and the cluster program's persistent loop loads the next
# tile while the consumers store this one. On an H200 (2026-12-03, scripts/cluster_probe.py
# set=short_k, RESULTS.md) its best of eight variants around one persistent tile was 2-9% ahead of
# the template's best of three at K = 128, 256, 512 and 1024 (six shapes, both layouts and dtypes)
# and 2% behind at K = 2048.
CLUSTER_MAX_K = 1024
# Whether the search turns ``stream_k``: not until it is measured beside the template
# (TILESEARCH_STREAM_K=1 offers it); while off the knob is not in the space, as with ``cluster``.
SEARCH_STREAM_K = os.environ.get("TILESEARCH_STREAM_K") == "1"
MAX_ACCUMULATORS_PER_THREAD = 128  # float32 registers per consumer thread; more spills on sm_90
MAX_SWAPPED_ACCUMULATORS = 192  # swapped tiles under TileLang's warp specialization (:func:`registers`)
MIN_K_TILES_PER_SPLIT = 4  # a split-K slice shorter than this is all pipeline fill and drain

# the knobs added after the plain template, with the values that reproduce it
DEFAULTS = {"split_k": 1, "persistent": False, "epilogue": "direct", "tma": True, "warp_specialize": "on",
            "swap_ab": False, "raster": "row",
            **({"cluster": "off", "schedule": "cooperative"} if SEARCH_CLUSTER else {}),
            **({"stream_k": 1} if SEARCH_STREAM_K else {})}
SWAP_AB_MAX_M = 256  # swapped tiles and deeper pipelines are offered up to this M (decode, small batches)
# Up to this M swapped tiles are also offered with heights (A rows, the MMA's N side) that cover M
# in a few whole tiles (:func:`swap_heights`). cuBLAS fits its tiles to the waves this way at
# mid-size M (192 x 208 at 784 x 6144 x 4096: 128 tiles for 132 SMs). On an H200
# (scripts/tile_probe.py set=swap, RESULTS.md) swapped 208x128 and 224x192 tiles ran 13-14% ahead
# of the template's best at 784 rows (4096 and 6144 wide), 2-5% at 1000 and 2657 rows of 6144,
# and gained nothing at 1000 and 2657 rows of 4096 (0.99x). Past this M the waves are many and the tail short.
WAVE_SWAP_MAX_M = 4096
# A GEMM with few rows streams its weights: its speed is the bytes in flight (on the H100, 16-row
# swapped tiles went from 37.7 to 21.7 us at n=k=4096 as they rose from 1.7 to 6.6 MB), so small
# problems may pipeline as deep as shared memory holds; cuBLAS runs 11 to 16 stages there.
MAX_STAGES, MAX_STAGES_SMALL_M = 5, 12


def fewest_tiles(m: int, n: int) -> int:
    """Output tiles of the largest tiles the register limit allows, 128 x 256 or 256 x 128 (two
    warp groups), whichever makes fewer."""
    return min(math.ceil(m / 128) * math.ceil(n / 256), math.ceil(m / 256) * math.ceil(n / 128))


def short_k_clusters(problem: Mapping[str, Any], target: Target) -> bool:
    """Whether the space offers the cluster program where :data:`SEARCH_CLUSTER` is off: K at
    most :data:`CLUSTER_MAX_K`, A's and B's rows aligned for its TMA loads, and at least two of the
    largest tiles per SM (:func:`fewest_tiles`), so that its persistent loop has a next tile to
    load while it stores one."""
    return (problem["k"] <= CLUSTER_MAX_K and operands_tma(problem)
            and fewest_tiles(problem["m"], problem["n"]) >= 2 * target.num_sms)


def single_has_next_tile(problem: Mapping[str, Any], target: Target) -> bool:
    """Whether ``TILESEARCH_CLUSTER=single`` offers the single block where K is long: only where
    the largest tiles outnumber the SMs (:func:`fewest_tiles`), so that its persistent loop has a
    next tile to load while it stores one; below that it is the template at best. Where they did
    not (512 x 4608 x 3584: 72 tiles of 128 x 256 on 132 SMs) two of three H100 searches with it
    offered ended at 0.900x and 0.905x cuBLAS, where the default space's two ended at 0.978x
    (2026-12-06, 2026-12-07; RESULTS.md "2026-12-07, night"): the knob's values and feature
    column change what the search proposes even where its trials on the program are few."""
    return fewest_tiles(problem["m"], problem["n"]) > target.num_sms


def swap_heights(m: int) -> tuple[int, ...]:
    """Swapped tile heights (A rows) that cover ``m`` in ``r`` tiles for the three smallest ``r``
    that fit (at most 256 rows a tile), rounded up to multiples of 16 (the MMA's N side: TileLang
    issues N=8 MMAs for others) and of 32 (the same split between two warp groups), past 128:
    ``784`` gives 208 and 224 (four tiles), 160 (five), 144 and 160 (six)."""
    first = math.ceil(m / 256)
    found = set()
    for r in range(first, first + 3):
        rows = math.ceil(m / r)
        for step in (16, 32):
            height = math.ceil(rows / step) * step
            if 128 < height <= 256:
                found.add(height)
    return tuple(sorted(found - {256}))


def block_n_values(n: int) -> tuple[int, ...]:
    """Tile widths: the powers of two from 64 to 256, and the multiples of 16 between them that
    divide ``n`` exactly. A model's widths often have factors of 3 or 7 (4608 = 2^9 x 9, 14336 =
    2^11 x 7), where a width with the same factor wastes no column and can fill the SMs better:
    at 512 x 4608 x 3584 cuBLAS runs 144-wide tiles (128 tiles on 132 SMs), and tiles of 192 or 96
    beat every power of two here by 12% (``scripts/gemm_probe.py`` on the H100, 2026-11-24)."""
    return tuple(sorted({64, 128, 256} | {w for w in range(80, 256, 16) if n % w == 0}))


def block_n_knob(n: int) -> Any:
    """The ``block_n`` knob: the same powers-of-two knob as before the other widths where ``n``
    has none (a strategy then proposes exactly what it did for such a problem), else the list."""
    widths = block_n_values(n)
    return PowerOfTwo("block_n", 64, 256) if widths == (64, 128, 256) else Categorical("block_n", widths)


def element_bytes(dtype: str) -> int:
    return 2


def smem_bytes(config: Mapping[str, Any], dtype: str, out_bytes: int | None = None) -> int:
    """Shared memory of one block: ``num_stages`` slices of A and of B, plus the output tile with
    ``epilogue=smem`` (``out_bytes`` an element, where C is not ``dtype``: einsum-sum's S). TileLang 0.1.15 overlays that tile on the operand buffers, except in the
    persistent loop (the next tile's operands are live), under its role-based warp
    specialization (it kept them apart in every kernel compiled: a 256x128x128 two-stage split-K
    tile asked for 327680 B, and failed at launch on an H100) and in the cluster program (a
    128x256x64 four-stage tile asked for 262144 B on an H200)."""
    c = config
    operands = c["num_stages"] * (c["block_m"] * c["block_k"] + c["block_k"] * c["block_n"]) * element_bytes(dtype)
    if c.get("cluster", "off") == "k2":  # the partner's partial sums, kept apart from the rest
        operands += c["block_m"] * c["block_n"] * 4
    if c.get("epilogue", "direct") == "chunked":  # the cluster program's two staging buffers of CHUNK columns
        groups = 2 if c.get("schedule", "cooperative") == "pingpong" else 1
        return operands + groups * 2 * c["block_m"] * gemm_cluster.CHUNK * (out_bytes or element_bytes(dtype))
    if c.get("epilogue", "direct") != "smem":
        return operands
    if out_bytes is None:
        out_bytes = 4 if c.get("split_k", 1) > 1 else element_bytes(dtype)
    out = c["block_m"] * c["block_n"] * out_bytes
    if c.get("schedule", "cooperative") == "pingpong":
        out *= 2  # a staging tile per consumer warp group
    apart = (c.get("persistent", False) or c.get("warp_specialize", "on") == "role_based"
             or c.get("cluster", "off") != "off" or c.get("stream_k", 1) > 1)
    return operands + out if apart else max(operands, out)


def gemm_warp_policy(name: str) -> Any:
    """TileLang's ``GemmWarpPolicy`` for a ``warp_policy`` knob value (also used by the cluster
    program and other tile-GEMM operators)."""
    import tilelang.language as T

    return {"square": T.GemmWarpPolicy.Square, "full_row": T.GemmWarpPolicy.FullRow,
            "full_col": T.GemmWarpPolicy.FullCol}[name]


def tile_count(problem: Mapping[str, Any], config: Mapping[str, Any]) -> int:
    """Output tiles of ``config`` (blocks of the plain launch)."""
    return math.ceil(problem["m"] / config["block_m"]) * math.ceil(problem["n"] / config["block_n"])


def registers(c: Mapping[str, Any]) -> str | None:
    """Why a tile needs more float32 accumulators per thread than fit in registers (also used by
    other tile-GEMM operators). A swapped tile under TileLang's warp specialization may hold
    :data:`MAX_SWAPPED_ACCUMULATORS`: its consumer warp groups get 240 registers a thread
    (``setmaxnreg``), and ptxas kept 156, 168 and 192 accumulators of 208x192, 224x192 and
    256x192 swapped tiles without a spill (sm_90a, 2026-11-29)."""
    owners = 128 if c.get("schedule", "cooperative") == "pingpong" else c["threads"]  # threads holding a tile
    acc = c["block_m"] * c["block_n"] // owners
    wide = c.get("swap_ab", False) and c.get("warp_specialize", "on") == "on" and c.get("cluster", "off") == "off"
    limit = MAX_SWAPPED_ACCUMULATORS if wide else MAX_ACCUMULATORS_PER_THREAD
    if acc > limit:
        return f"registers: {acc} float32 accumulators per thread > {limit}"
    return None


def output_tolerance(dtype: str) -> Tolerance:
    """Errors accepted for a float32-accumulated product rounded to ``dtype`` on output: unit
    roundoff 2^-11 (fp16) or 2^-8 (bf16), with a 4x margin."""
    if dtype == "float16":
        return Tolerance(rel_fro=2e-3, max_rel=2e-3)
    return Tolerance(rel_fro=1.6e-2, max_rel=1.6e-2)


def constraints(dtype: str, target: Target, problem: Mapping[str, Any] | None = None) -> list[Any]:
    """Why a configuration is invalid or not worth compiling; with ``problem``, also the checks
    that depend on the shape (split-K and the persistent loop)."""
    limit = target.smem_per_block

    def shared_memory(c: Mapping[str, Any]) -> str | None:
        used = smem_bytes(c, dtype)
        return f"shared memory: {used} B > {limit} B per block" if used > limit else None

    def lowering(c: Mapping[str, Any]) -> str | None:
        tma, ws = c.get("tma", True), c.get("warp_specialize", "on")
        if ws != "off" and not tma:
            return "warp specialization: TileLang 0.1.15 specializes only TMA pipelines (same kernel as warp_specialize=off)"
        if tma and ws == "off" and c.get("epilogue", "direct") == "direct":
            return "tma: unspecialized pipelines load with cp.async, a direct epilogue stores no tile (same kernel as tma=False)"
        return None

    def swapped(c: Mapping[str, Any]) -> str | None:
        bm = c["block_m"]
        if not c.get("swap_ab", False):
            if bm < MMA_ROWS:
                return f"block_m: {bm} rows are fewer than a warp group's MMA ({MMA_ROWS}); only swap_ab tiles are that short"
            if bm & (bm - 1):
                return f"block_m: {bm} rows: unswapped tiles are 64, 128 or 256 rows (other heights are swapped tiles' A rows)"
            return None
        groups = c["threads"] // 128
        if c["warp_policy"] == "full_col" and bm > 128 and groups > 1:
            # the tall tiles of mid-size M: the two warp groups split the A rows (the MMA's N side)
            if bm % (16 * groups):
                return f"swap_ab: block_m {bm} does not split into {groups} MMAs of a multiple of 16 columns"
            if c["block_n"] % MMA_ROWS:
                return f"swap_ab: block_n {c['block_n']} is not a multiple of a warp group's MMA rows ({MMA_ROWS})"
            return None
        if c["warp_policy"] != "full_row":
            return ("swap_ab: the warp groups split the tile's block_n weight rows (full_row), or a tile's more than "
                    "128 A rows (full_col); other policies are the same kernel or invalid")
        if bm > 16 and bm % 16:
            return f"swap_ab: block_m {bm} is not a multiple of 16 (the MMA's N side)"
        rows = MMA_ROWS * groups
        if c["block_n"] % rows:
            return f"swap_ab: block_n {c['block_n']} is not a multiple of the warp groups' MMA rows ({rows})"
        return None

    def hangs(c: Mapping[str, Any]) -> str | None:
        # scripts/hang_probe.py on an H100 (8192^3 float16): 128x256x32, full_col, persistent,
        # warp-specialized (on or role_based), 2 stages, direct epilogue passed its check and hung
        # within 50 launches in 3 of 3 processes, and in 3 of 7 tunes of README's command; 3 or 4
        # stages, the smem epilogue, full_row, block_k 64 or no persistent loop: 0 hangs in 6000
        # launches each. The producer warps run ahead into the next tile while the consumers still
        # store this one, and two stages leave them no slack.
        # (TileLang's pipeline: the cluster program's barriers hold the producer back itself)
        if (c.get("persistent", False) and c.get("warp_specialize", "on") != "off" and c["num_stages"] == 2
                and c.get("epilogue", "direct") == "direct" and c.get("cluster", "off") == "off"
                and c.get("stream_k", 1) == 1):
            return ("persistent: a warp-specialized persistent loop with 2 stages and a direct epilogue "
                    "hangs (TileLang 0.1.15 on sm_90a)")
        return None

    def clustered(c: Mapping[str, Any]) -> str | None:
        if c.get("epilogue", "direct") == "chunked":
            if c.get("cluster", "off") == "off" or c.get("split_k", 1) > 1 or c.get("stream_k", 1) > 1:
                return "epilogue: chunked is an epilogue of the cluster program (cluster=m2, n2 or single)"
            if c["block_n"] % gemm_cluster.CHUNK:
                return f"epilogue: chunked stores {gemm_cluster.CHUNK} columns at a time, which block_n must be a multiple of"
            # a chunk's columns are then held by half of the warps, and the copy of each chunk from the
            # accumulators came out wrong: relative errors 0.47 and 0.70 at 128x256 tiles with 256
            # threads and square (H200, 2026-12-06, model_shapes/single_vs_default_2026-12-06), where
            # full_row was correct at the same tiles
            if c.get("warp_policy", "full_row") != "full_row":
                return "epilogue: chunked copies the tile a column chunk at a time, correct only with whole rows per warp (warp_policy=full_row)"
        if c.get("cluster", "off") == "off":
            if c.get("schedule", "cooperative") != "cooperative":
                return "schedule: ping-pong is a schedule of the cluster program (cluster=m2 or n2)"
            return None
        if c.get("schedule", "cooperative") == "pingpong" and not (c.get("persistent", False) and c["threads"] == 256):
            return "schedule: ping-pong alternates two consumer warp groups (threads=256) over the tiles of a persistent loop"
        if c.get("split_k", 1) > 1 or c.get("swap_ab", False):
            return "cluster: the cluster program computes whole tiles, unswapped"
        if not c.get("tma", True):
            return "cluster: the cluster program loads with TMA (multicast)"
        if c.get("warp_specialize", "on") != "on":
            return "cluster: the cluster program specializes its warp groups itself (same kernel as warp_specialize=on)"
        # a consumer releases a stage once the MMAs of the next are issued (one group in flight),
        # so the producer's refill of a single stage waits on the consumer waiting for it: the
        # first H200 search hung on all 6 such kernels it drew
        if c["num_stages"] < 2:
            return "cluster: the cluster program keeps one stage of MMAs in flight, which needs num_stages >= 2"
        return None

    def streamed(c: Mapping[str, Any]) -> str | None:
        if c.get("stream_k", 1) == 1:
            return None
        if not c.get("persistent", False):
            return "stream_k: the stream-K program is a persistent loop (persistent=True)"
        if c.get("split_k", 1) > 1 or c.get("swap_ab", False) or c.get("cluster", "off") != "off":
            return "stream_k: the stream-K program computes whole tiles, unswapped, unclustered, one K split"
        if not c.get("tma", True) or c.get("warp_specialize", "on") != "on":
            return "stream_k: the stream-K program loads with TMA and specializes its warp groups itself (tma=True, warp_specialize=on)"
        if c["num_stages"] < 2:  # as the cluster program's: a stage is released once the next one's MMAs are issued
            return "stream_k: the stream-K program keeps one stage of MMAs in flight, which needs num_stages >= 2"
        return None

    checks = [shared_memory, registers, lowering, swapped, hangs, clustered, streamed]
    if problem is None:
        return checks
    m, n, k, sms = problem["m"], problem["n"], problem["k"], target.num_sms
    tma_loads, tma_store = tma_rows(problem)

    def alignment(c: Mapping[str, Any]) -> str | None:
        if not tma_loads and c.get("warp_specialize", "on") != "off":
            return "warp specialization: rows of A and B are not 16-byte aligned, no TMA loads (same kernel as warp_specialize=off)"
        if not (tma_loads or tma_store) and c.get("tma", True):
            return "tma: no operand's rows are 16-byte aligned (same kernel as tma=False)"
        return None

    def split_k(c: Mapping[str, Any]) -> str | None:
        splits = c.get("split_k", 1)
        if splits == 1:
            return None
        tiles = tile_count(problem, c)
        if tiles >= sms:
            return f"split-K: {tiles} output tiles already fill {sms} SMs"
        k_tiles = math.ceil(k / c["block_k"])
        if math.ceil(k_tiles / splits) < MIN_K_TILES_PER_SPLIT:
            return f"split-K: {k_tiles} K tiles in {splits} slices leave fewer than {MIN_K_TILES_PER_SPLIT} per slice"
        ws = math.prod(workspace_shape(m, n, k, block_m=c["block_m"], block_n=c["block_n"], split_k=splits)) * 4
        if ws > target.l2_bytes:
            return f"split-K: workspace {ws / 2**20:.0f} MiB > L2 {target.l2_bytes / 2**20:.0f} MiB"
        return None

    def one_row(c: Mapping[str, Any]) -> str | None:
        if c["panel_size"] and math.ceil(m / c["block_m"]) == 1:
            return "panel_size: one row of tiles, which every panel walks in the launch order of panel_size=0 (same kernel)"
        if c.get("raster", "row") == "column":
            if not c["panel_size"]:
                return "raster: panel_size=0 launches in row-major order whatever the raster (same kernel as row)"
            if math.ceil(n / c["block_n"]) == 1:
                return "raster: one column of tiles, which column panels walk in row-major order (same order as row)"
        return None

    def persistent(c: Mapping[str, Any]) -> str | None:
        tiles = tile_count(problem, c)
        if c.get("persistent", False) and tiles <= sms and c.get("stream_k", 1) == 1:
            return f"persistent: {tiles} tiles fit in one wave over {sms} SMs"
        return None

    short_k = short_k_clusters(problem, target)

    def pairs(c: Mapping[str, Any]) -> str | None:
        cluster = c.get("cluster", "off")
        if cluster == "off":
            return None
        # where K is short the program's gain is its persistent loop storing one tile through
        # shared memory while it loads the next: in an H200 search at 8192x8192x256 (2026-12-03)
        # its other kernels were 0.29-0.60x cuBLAS, and a third of the space, they took 14 of 40 trials
        if short_k and not (c.get("persistent", False) and c.get("epilogue", "direct") in ("smem", "chunked")):
            return "cluster: where K is short only the persistent program storing through shared memory is worth compiling"
        # where K is long the single block gains by its persistent loop storing 64 columns at a time
        # while the next tile loads: at the same tiles its other forms were 3-10% behind the
        # template (H100, 2026-12-06, set=single: direct 0.70-0.96x cuBLAS, 3 stages through shared
        # memory 0.67-0.94x) where this one ran 0.995-1.025x (set=chunked). Searched with them
        # (H100, 2026-12-07, model_shapes/suite_single_h100_2026-12-07) they took 9 of 40 trials
        # at 2048 x 28672 x 4096, at 0.47-0.91x, and the search timed this one in none
        if not short_k and cluster == "single" and not (c.get("persistent", False)
                                                        and c.get("epilogue", "direct") == "chunked"):
            return "cluster: where K is long only the single block's persistent loop with the chunked epilogue is worth compiling"
        if cluster == "k2":
            if c.get("persistent", False):
                return "cluster: k2 reduces one tile per pair of blocks (no persistent loop)"
            tiles = tile_count(problem, c)
            if tiles >= sms:
                return f"cluster: k2: {tiles} output tiles already fill {sms} SMs"
            if math.ceil(k / c["block_k"]) < 2 * MIN_K_TILES_PER_SPLIT:
                return f"cluster: k2 leaves fewer than {MIN_K_TILES_PER_SPLIT} K tiles to each block of the pair"
        if not operands_tma(problem):
            return "cluster: the cluster program loads A and B by TMA, which needs 16-byte aligned rows of both"
        if cluster == "m2" and math.ceil(m / c["block_m"]) == 1:
            return "cluster: one row of tiles, no pair to share B's tile"
        if cluster == "n2" and math.ceil(n / c["block_n"]) == 1:
            return "cluster: one column of tiles, no pair to share A's tile"
        return None

    def tail(c: Mapping[str, Any]) -> str | None:
        slices = c.get("stream_k", 1)
        if slices == 1:
            return None
        k_tiles = math.ceil(k / c["block_k"])
        if k_tiles < slices * MIN_K_TILES_PER_SPLIT:
            return f"stream_k: {k_tiles} K tiles in {slices} slices leave fewer than {MIN_K_TILES_PER_SPLIT} per slice"
        if not operands_tma(problem):
            return "stream_k: the stream-K program loads A and B by TMA, which needs 16-byte aligned rows of both"
        if tile_count(problem, c) % sms == 0:
            return f"stream_k: {tile_count(problem, c)} tiles make whole waves over {sms} SMs, no partial wave to spread"
        return None

    return checks + [alignment, split_k, one_row, persistent, pairs, tail]


def operands_tma(problem: Mapping[str, Any]) -> bool:
    """Whether TMA can load both A and B (16-byte aligned rows of each), as the programs that
    write their own TMA loads (cluster, stream-K) need."""
    size = element_bytes(problem["dtype"])
    return not (problem["k"] * size % 16 or (problem["layout"] == "nn" and problem["n"] * size % 16))


def tma_rows(problem: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether TMA can load A or B, and store C: TileLang needs 16-byte aligned rows for a
    tensor map, and falls back to other copies where they are not."""
    size = element_bytes(problem["dtype"])
    a_rows, c_rows = problem["k"] * size, problem["n"] * size
    b_rows = a_rows if problem["layout"] == "nt" else c_rows
    return a_rows % 16 == 0 or b_rows % 16 == 0, c_rows % 16 == 0


class GemmOp(Operator):
    """Dense matrix product on tensor cores."""

    name = "gemm"
    description = "C = A @ B (nn) or A @ B.T (nt); fp16/bf16 in, fp32 accumulate, output in input dtype"
    defaults = DEFAULTS
    runtime_params = ("m",)
    params = (
        Param("m", int, minimum=1, help="rows of A and C"),
        Param("n", int, minimum=1, help="columns of C"),
        Param("k", int, minimum=1, help="reduction length"),
        Param("dtype", str, default="float16", choices=DTYPES),
        Param("layout", str, default="nn", choices=LAYOUTS, help="nn: B is KxN; nt: B is NxK"),
    )
    examples = (
        dict(m=256, n=256, k=256),
        dict(m=17, n=33, k=65, dtype="bfloat16", layout="nt"),
        dict(m=1000, n=1500, k=500, layout="nt"),
    )

    def space(self, problem: Problem, target: Target) -> Space:
        """The knobs; ``split_k`` and ``persistent`` only take values some tile shape can use
        on this problem (the constraints prune the rest per configuration)."""
        m, n, k, sms = problem["m"], problem["n"], problem["k"], target.num_sms
        # (not where 256-row tiles cover M exactly: the recorded datasets' sizes, 1024 and 4096 rows,
        # keep the space they were recorded in)
        small, mid = m <= SWAP_AB_MAX_M, SWAP_AB_MAX_M < m <= WAVE_SWAP_MAX_M and m % 256 != 0
        heights = swap_heights(m) if mid else ()
        most_tiles = math.ceil(m / (16 if small else MMA_ROWS)) * math.ceil(n / 64)
        most_splits = min(16, math.ceil(k / 32) // MIN_K_TILES_PER_SPLIT) if fewest_tiles(m, n) < sms else 1
        programs = (CLUSTERS if SEARCH_CLUSTER else SHORT_K_CLUSTERS if short_k_clusters(problem, target)
                    else SINGLE_CLUSTERS if SEARCH_SINGLE and single_has_next_tile(problem, target)
                    else None)  # the cluster program's, if offered
        clustered = programs is not None
        knobs = [
            (Categorical("block_m", tuple(sorted({64, 128, 256, *heights}))) if heights
             else PowerOfTwo("block_m", 16 if small else MMA_ROWS, 256)),
            block_n_knob(n),
            PowerOfTwo("block_k", 32, 128),
            IntRange("num_stages", 1, MAX_STAGES_SMALL_M if small else MAX_STAGES),
            Categorical("threads", (128, 256)),
            Categorical("panel_size", (0, 4, 8, 16)),
            Categorical("raster", RASTERS if SEARCH_COLUMN_RASTER and min(m, n) > MMA_ROWS else RASTERS[:1]),
            Categorical("warp_policy", WARP_POLICIES),
            PowerOfTwo("split_k", 1, 1 << (max(most_splits, 1).bit_length() - 1)),
            Categorical("persistent", (False, True) if most_tiles > sms else (False,)),
            Categorical("epilogue", CLUSTER_EPILOGUES if clustered else EPILOGUES),
            Categorical("tma", (True, False)),
            Categorical("warp_specialize", WARP_SPECIALIZE),
            Categorical("swap_ab", (False, True) if small or heights else (False,)),
        ]
        if clustered:
            knobs.append(Categorical("cluster", programs))
            if programs is not SINGLE_CLUSTERS:
                knobs.append(Categorical("schedule", SCHEDULES))
        if SEARCH_STREAM_K:
            knobs.append(Categorical("stream_k", STREAM_K if most_tiles > sms else STREAM_K[:1]))
        # the constraints are functions of the problem and the target alone: listed once a process
        return Space(knobs, constraints(problem["dtype"], target, problem), key=(problem, target))

    def program(self, problem: Problem, config: Config, target: Target, runtime: tuple[str, ...] = ()) -> Any:
        """The tile program; with ``runtime=("m",)`` M is a run-time value (``T.dynamic``), so
        the kernel serves every M (edge tiles are predicated as for any M)."""
        import tilelang.language as T

        knobs = {k: v for k, v in config.items() if k != "warp_specialize"}
        m = T.dynamic("m") if "m" in runtime else problem["m"]
        if knobs.get("cluster", "off") != "off":
            used = ("cluster", "block_m", "block_n", "block_k", "num_stages", "threads", "panel_size", "warp_policy",
                    "epilogue", "raster", "persistent", "schedule")
            return cluster_gemm_program(m, problem["n"], problem["k"], problem["dtype"], problem["layout"],
                                        **{k: knobs[k] for k in used if k in knobs}, num_sms=target.num_sms)
        knobs.pop("cluster", None)
        knobs.pop("schedule", None)
        if knobs.pop("stream_k", 1) > 1:
            used = ("block_m", "block_n", "block_k", "num_stages", "threads", "panel_size", "warp_policy", "epilogue",
                    "raster")
            return stream_k_gemm_program(m, problem["n"], problem["k"], problem["dtype"], problem["layout"],
                                         stream_k=config["stream_k"], **{k: knobs[k] for k in used if k in knobs},
                                         num_sms=target.num_sms)
        return gemm_program(
            m, problem["n"], problem["k"], problem["dtype"], problem["layout"], **knobs, num_sms=target.num_sms
        )

    def pass_configs(self, problem: Problem, config: Config) -> dict[str, Any]:
        """``warp_specialize``: ``off`` disables TileLang's warp-specialization pass,
        ``role_based`` selects its automatic scheduler; the cluster program orders its warp
        groups itself (:func:`search_spaces.gemm_cluster.pass_configs`)."""
        if config.get("cluster", "off") != "off":
            return gemm_cluster.pass_configs(config["cluster"], config.get("schedule", "cooperative"))
        if config.get("stream_k", 1) > 1:
            return gemm_stream_k.pass_configs()
        ws = config.get("warp_specialize", "on")
        if ws == "off":
            return {"tl.disable_warp_specialized": True}
        if ws == "role_based":
            return {"tl.enable_auto_warp_specialization": "role_based"}
        return {}

    def build(self, problem: Problem, config: Config, target: Target, runtime: tuple[str, ...] = ()) -> Any:
        """Compiles one configuration; with ``split_k > 1`` a :class:`~tilesearch.composite.Composite`
        of the program (its GEMM and reduction kernels) and its float32 partial-sum workspace ``W``,
        which every call rewrites whole before reading it."""
        import logging

        import tilelang

        logging.getLogger("tilelang").setLevel(logging.WARNING)  # TileLang logs as "tilelang"
        kernel = tilelang.compile(
            self.program(problem, config, target, runtime=runtime),
            target=target.tvm(),
            pass_configs=self.pass_configs(problem, config) or None,
        )
        if config.get("stream_k", 1) > 1:
            partials, counters = gemm_stream_k.workspace_shapes(config["block_m"], config["block_n"], target.num_sms)
            return Composite([Launch(kernel, ("A", "B", "W", "S", "C"))], inputs=("A", "B"), outputs=("C",),
                             workspaces=[Workspace("W", partials, "float32"),
                                         Workspace("S", counters, "int32", zeroed=True)])
        splits = config.get("split_k", 1)
        if splits == 1:
            return kernel
        m = Dim("m", config["block_m"]) if "m" in runtime else problem["m"]
        shape = workspace_shape(m, problem["n"], problem["k"], block_m=config["block_m"], block_n=config["block_n"],
                                split_k=splits)
        return Composite([Launch(kernel, ("A", "B", "W", "C"))], inputs=("A", "B"), outputs=("C",),
                         workspaces=[Workspace("W", shape, "float32")],
                         sizes={"m": ("A", 0)} if "m" in runtime else None)

    def make_inputs(self, problem: Problem, device: Any, generator: Any) -> tuple[Any, ...]:
        import torch

        dtype = getattr(torch, problem["dtype"])
        m, n, k = problem["m"], problem["n"], problem["k"]
        b_shape = (k, n) if problem["layout"] == "nn" else (n, k)
        a = torch.randn((m, k), device=device, generator=generator, dtype=torch.float32).to(dtype)
        b = torch.randn(b_shape, device=device, generator=generator, dtype=torch.float32).to(dtype)
        return a, b

    def make_outputs(self, problem: Problem, device: Any) -> tuple[Any, ...]:
        import torch

        return (torch.empty((problem["m"], problem["n"]), device=device, dtype=getattr(torch, problem["dtype"])),)

    def _b_kn(self, problem: Problem, b: Any) -> Any:
        return b if problem["layout"] == "nn" else b.t()

    def reference(self, problem: Problem, inputs: Sequence[Any]) -> tuple[Any, ...]:
        import torch

        a, b = inputs
        return (a.to(torch.float64) @ self._b_kn(problem, b).to(torch.float64),)

    def baseline(self, problem: Problem, inputs: Sequence[Any]) -> Any:
        import torch

        a, b = inputs
        bk = self._b_kn(problem, b)
        out = torch.empty((problem["m"], problem["n"]), device=a.device, dtype=a.dtype)
        return lambda: torch.matmul(a, bk, out=out)

    def flops(self, problem: Problem) -> float:
        return 2.0 * problem["m"] * problem["n"] * problem["k"]

    def bytes(self, problem: Problem) -> float:
        m, n, k = problem["m"], problem["n"], problem["k"]
        return float((m * k + k * n + m * n) * element_bytes(problem["dtype"]))

    def tolerance(self, problem: Problem, config: Config) -> Tolerance:
        return output_tolerance(problem["dtype"])

    # -- performance knowledge (search_spaces/gemm_model.py) --

    hint_kinds = ("carver",)

    def features(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
        return gemm_model.features(problem, config, target)

    def estimate(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> float:
        return gemm_model.estimate(problem, config, target)

    def rivals(self, problem: Mapping[str, Any], space: Space, config: Mapping[str, Any]) -> list[Config]:
        return gemm_model.rivals(space, config)

    def refits(self, problem: Problem, space: Space, target: Target, config: Mapping[str, Any], n: int) -> list[Config]:
        return gemm_model.refits(problem, space, target, config, n, block_n_values(problem["n"]))

    def hints(self, problem: Problem, space: Space, target: Target, *, kind: str, n: int) -> list[Config]:
        if kind != "carver":
            return super().hints(problem, space, target, kind=kind, n=n)
        return gemm_model.carver_hints(problem, space, target, n)


def gemm_program(
    m: int,
    n: int,
    k: int,
    dtype: str = "float16",
    layout: str = "nn",
    *,
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 32,
    num_stages: int = 3,
    threads: int = 128,
    panel_size: int = 8,
    warp_policy: str = "square",
    split_k: int = 1,
    persistent: bool = False,
    epilogue: str = "direct",
    tma: bool = True,
    swap_ab: bool = False,
    raster: str = "row",
    num_sms: int = 132,
    shift_edges: bool = True,
) -> Any:
    """The GEMM tile program for one configuration (a TileLang ``PrimFunc``). ``m`` is a size or
    a TIR variable (``T.dynamic("m")``): M as a run-time value.

    With ``split_k > 1`` the program takes a float32 workspace before ``C`` (see
    :func:`workspace_shape`) and holds two kernels: the GEMM writes one partial tile per K split,
    a reduction kernel sums them into ``C``. ``persistent`` launches ``min(tiles, num_sms)``
    blocks that loop over the tiles in the same rasterized order (``raster``: panels of tile rows
    or of tile columns). ``epilogue="smem"`` stages the
    output tile through shared memory; ``tma=False`` keeps every copy off TMA. ``swap_ab``
    accumulates the tile transposed (``block_n x block_m``: B's rows are the MMA's M side) and
    stores it transposed. The
    ``warp_specialize`` knob is a pass configuration (:meth:`GemmOp.pass_configs`).

    ``shift_edges``: with the ``smem`` epilogue's TMA store (and no split-K), a tile that would run
    past M or N starts ``block`` rows or columns before the edge instead, overlapping its
    neighbour (:func:`tile_start`).
    """
    import tilelang.language as T

    policy = gemm_warp_policy(warp_policy)
    transpose_b = layout == "nt"
    b_shape = (n, k) if transpose_b else (k, n)
    b_tile = (block_n, block_k) if transpose_b else (block_k, block_n)
    static_m = isinstance(m, int)
    tiles_m, tiles_n = (math.ceil(m / block_m) if static_m else T.ceildiv(m, block_m)), math.ceil(n / block_n)
    tiles = tiles_m * tiles_n
    k_iters = math.ceil(math.ceil(k / block_k) / split_k)  # K tiles per split
    split = split_k > 1
    out_dtype = "float32" if split else dtype
    workers = min(tiles, num_sms) if static_m else num_sms
    waves = math.ceil(tiles / workers) if static_m else T.ceildiv(tiles, workers)

    # only where the tile leaves through a TMA store (the split-K workspace holds whole tiles)
    shift = shift_edges and not split and epilogue == "smem" and tma

    @T.macro
    def tile(A, B, out, a_tile, b_tile_s, acc, c_s, tm, tn, kz):
        row = tile_start(tm, block_m, m) if shift else tm * block_m
        col = tile_start(tn, block_n, n) if shift else tn * block_n
        T.clear(acc)
        for ko in T.Pipelined(k_iters, num_stages=num_stages):
            kk = (kz * k_iters + ko) * block_k
            T.copy(A[row, kk], a_tile, disable_tma=not tma)
            if transpose_b:
                T.copy(B[col, kk], b_tile_s, disable_tma=not tma)
            else:
                T.copy(B[kk, col], b_tile_s, disable_tma=not tma)
            if swap_ab:  # acc = B_tile^T-rows @ A_tile^T: (block_n x block_k) @ (block_k x block_m)
                T.gemm(b_tile_s, a_tile, acc, transpose_A=not transpose_b, transpose_B=True, policy=policy)
            else:
                T.gemm(a_tile, b_tile_s, acc, transpose_B=transpose_b, policy=policy)
        if swap_ab and epilogue == "smem":
            for i, j in T.Parallel(block_n, block_m):
                c_s[j, i] = acc[i, j]
        elif epilogue == "smem":
            T.copy(acc, c_s)
        if epilogue == "smem":
            if split:
                T.copy(c_s, out[kz, row, col], disable_tma=not tma)
            else:
                T.copy(c_s, out[row, col], disable_tma=not tma)
        elif swap_ab:
            for i, j in T.Parallel(block_n, block_m):
                if split:  # the workspace holds whole tiles
                    out[kz, row + j, col + i] = acc[i, j]
                elif row + j < m and col + i < n:
                    out[row + j, col + i] = acc[i, j]
        else:
            if split:
                T.copy(acc, out[kz, row, col])
            else:
                T.copy(acc, out[row, col])

    def buffers():
        a_tile = T.alloc_shared((block_m, block_k), dtype)
        b_tile_s = T.alloc_shared(b_tile, dtype)
        acc = T.alloc_fragment((block_n, block_m) if swap_ab else (block_m, block_n), "float32")
        c_s = T.alloc_shared((block_m, block_n), out_dtype) if epilogue == "smem" else None
        return a_tile, b_tile_s, acc, c_s

    if split:
        # with a run-time M, the workspace's rows are M rounded up to whole tiles, an expression of M
        # (the launch checks W against it): as a run-time value of their own, TileLang could not tell
        # that the tiles' rows fit, and guarded each of the GEMM's partial-sum stores
        ws = workspace_shape(m if static_m else T.ceildiv(m, block_m) * block_m, n, k, block_m=block_m, block_n=block_n,
                             split_k=split_k)
        reduce_m = REDUCE_ELEMENTS // REDUCE_COLUMNS

        @T.prim_func
        def gemm_split_k(
            A: T.Tensor((m, k), dtype),
            B: T.Tensor(b_shape, dtype),
            W: T.Tensor(ws, "float32"),
            C: T.Tensor((m, n), dtype),
        ):
            with T.Kernel(tiles_n, tiles_m, split_k, threads=threads) as (bx, by, bz):
                a_tile, b_tile_s, acc, c_s = buffers()
                T.use_swizzle(panel_size=max(panel_size, 1), order=raster, enable=panel_size > 0)
                tile(A, B, W, a_tile, b_tile_s, acc, c_s, by, bx, bz)
            with T.Kernel(T.ceildiv(n, REDUCE_COLUMNS), T.ceildiv(m, reduce_m), threads=REDUCE_THREADS) as (rx, ry):
                total = T.alloc_fragment((reduce_m, REDUCE_COLUMNS), "float32")
                T.clear(total)
                for z in T.unroll(split_k):
                    for i, j in T.Parallel(reduce_m, REDUCE_COLUMNS):
                        total[i, j] += W[z, ry * reduce_m + i, rx * REDUCE_COLUMNS + j]
                T.copy(total, C[ry * reduce_m, rx * REDUCE_COLUMNS])

        return gemm_split_k

    if persistent:

        @T.prim_func
        def gemm_persistent(
            A: T.Tensor((m, k), dtype),
            B: T.Tensor(b_shape, dtype),
            C: T.Tensor((m, n), dtype),
        ):
            with T.Kernel(workers, threads=threads) as worker:
                a_tile, b_tile_s, acc, c_s = buffers()
                for w in T.serial(waves):
                    t = w * workers + worker
                    if t < tiles:
                        tm, tn = rasterized(t, tiles_m, tiles_n, panel_size, raster)
                        tile(A, B, C, a_tile, b_tile_s, acc, c_s, tm, tn, 0)

        return gemm_persistent

    @T.prim_func
    def gemm(
        A: T.Tensor((m, k), dtype),
        B: T.Tensor(b_shape, dtype),
        C: T.Tensor((m, n), dtype),
    ):
        with T.Kernel(tiles_n, tiles_m, threads=threads) as (bx, by):
            a_tile, b_tile_s, acc, c_s = buffers()
            T.use_swizzle(panel_size=max(panel_size, 1), order=raster, enable=panel_size > 0)
            tile(A, B, C, a_tile, b_tile_s, acc, c_s, by, bx, 0)

    return gemm


def tile_start(t: Any, block: int, size: Any) -> Any:
    """Where tile ``t`` of ``block`` rows (or columns) starts along a dimension of ``size``: at
    ``t x block``, except that the last tile, where ``size`` is not a multiple of ``block``, starts
    ``block`` before the edge (``size`` at least ``block``) and recomputes some of its neighbour's
    rows, writing the same values again.

    A TMA store whose box runs past the tensor's edge is slow. On the H100 (``scripts/edge_probe.py``
    at ``e3aa095``, n=k=4096, run-time M) the 256x128 tile with the ``smem`` epilogue took 0.048 ms
    at m=999 and 0.057-0.084 ms at m=520-800 clipped, 0.045-0.048 ms shifted (1.2-1.75x; 1.14-1.21x
    at m=1540-4870); the 128x128 tile gained up to 1.3x. Tiles that store from registers
    (``direct``) gained nothing and lost up to 2.5% to the extra index arithmetic, so only the ``smem``
    epilogue's tiles are shifted. The overlapping rows are computed from the same data in the
    same order: both writes agree, and every shifted output in that run equalled the clipped one
    bit for bit. ``size`` may be a run-time value (then the choice is made at run time)."""
    import tilelang.language as T

    if isinstance(size, int):
        return t * block if size % block == 0 or size < block else T.min(t * block, size - block)
    return T.max(T.min(t * block, size - block), 0)


REDUCE_ELEMENTS, REDUCE_THREADS = 2048, 128  # split-K reduction: 16 partial sums a thread, one K slice at a time
REDUCE_COLUMNS = 128
"""Columns of a split-K reduction block, whatever the GEMM's ``block_n``: a power of two, so a
thread's element of the block is found by shifts. With M a run-time value TileLang computes the
indices in 64 bits, and the reduction of a 192-wide tile divided them by 3 and by 192 for each
of its 60 loads a thread, in software: on the H100 (``scripts/dynamic_m_probe.py``, 2026-11-28,
``75dca45``) the reduction of a 64x6144x4096 split-K 4 GEMM took 7.87 us with M a run-time value
against 3.72 us compiled for 64 rows (the GEMM kernels 23.5 and 23.4 us), so the dispatched
kernel was 1.12x the static one, where a range measured 1.15x on an H200."""


def workspace_shape(m: Any, n: int, k: int, *, block_m: int, block_n: int, split_k: int) -> tuple[Any, Any, int]:
    """Split-K partial sums: one float32 tile per output tile and K slice, padded to whole tiles
    (so every call writes all of it before the reduction reads it). A run-time ``m`` (a
    :class:`~tilesearch.composite.Dim` or a TIR variable) is passed through: the caller rounds it."""
    rows = math.ceil(m / block_m) * block_m if isinstance(m, int) else m
    return (split_k, rows, math.ceil(n / block_n) * block_n)


def rasterized(t: Any, tiles_m: Any, tiles_n: Any, panel: int, order: str = "row") -> tuple[Any, Any]:
    """The (M, N) tile of linear tile ``t`` in ``order``: ``row`` as :func:`raster`, ``column``
    its transpose, as TileLang's ``rasterization2DColumn`` (panels of ``panel`` tile columns walked
    row by row, every other panel bottom to top); ``panel=0`` is row-major either way."""
    if order == "row" or panel == 0:
        return raster(t, tiles_m, tiles_n, panel)
    tn, tm = raster(t, tiles_n, tiles_m, panel)
    return tm, tn


def raster(t: Any, tiles_m: Any, tiles_n: Any, panel: int) -> tuple[Any, Any]:
    """The (M, N) tile of linear tile ``t`` in the order of TileLang's ``rasterization2DRow``:
    panels of ``panel`` tile rows walked column by column, every other panel right to left, the
    last panel narrower if ``panel`` does not divide the rows (``panel=0``: row-major)."""
    import tilelang.language as T

    div, mod = T.truncdiv, T.truncmod  # t >= 0: no floor corrections
    if panel == 0:
        return div(t, tiles_n), mod(t, tiles_n)
    span = panel * tiles_n
    index, offset = div(t, span), mod(t, span)
    tail = tiles_m % panel  # a TIR expression when M is a run-time value
    rows = panel if isinstance(tail, int) and tail == 0 else T.if_then_else(index < tiles_m // panel, panel, tail)
    col = div(offset, rows)
    col = T.if_then_else(mod(index, 2) == 1, tiles_n - 1 - col, col)
    return mod(offset, rows) + index * panel, col
