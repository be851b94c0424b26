"""The GEMM tile program for pairs of blocks in a thread-block cluster that share one operand
through TMA multicast (``cluster`` knob of :mod:`search_spaces.gemm`).

Why a program of its own: at the model shapes where the tuned GEMM trails cuBLAS (512 rows and
more), Nsight Compute shows cuBLAS launching clusters of two blocks whose shared operand is
loaded once from L2 and multicast into both blocks' shared memory (RESULTS.md, "What cuBLAS runs
at these shapes"). TileLang 0.1.15's automatic warp specialization declines multicast copies: its
pipeline barriers are local to one block, and a multicast write into the other block's stage must
wait until *that* block's consumers have released it. So the pipeline here is written out:

- one producer warp group and ``threads / 128`` consumer warp groups per block;
- per stage, a ``full`` barrier (local: the producer's threads arrive, and each block expects the
  bytes of both tiles, its own load and the multicast alike) and an ``empty`` barrier (cluster
  barrier: one lane of every consumer warp of *both* blocks arrives on it in both blocks, so the
  block that issues the multicast refills a stage only once its partner has consumed it too);
- the lower-ranked block of the pair issues the shared tile's multicast; each block loads its own
  tile of the other operand;
- a cluster-wide barrier after the barriers' initialisation and before exit, so no block receives
  a remote arrive or a multicast before its barriers exist or after it has left.

``cluster="m2"`` pairs two tiles of rows (blocks ``(x, 2j)`` and ``(x, 2j+1)``) that share B's
tile; ``"n2"`` pairs two tiles of columns that share A's. A pair that would run off the edge of
the tile grid keeps its second block (launch grids are whole clusters): it loads zeros beyond
the matrix, which TMA fills, and stores nothing there (the store is predicated).

``cluster="k2"`` is split-K reduced inside the kernel, in place of the split-K template's
second pass over a global workspace: both blocks of a pair compute the same tile over halves of
K, and block 1 sends its float32 partial sums into block 0's shared memory in one bulk copy
(distributed shared memory), which block 0 adds to its own before storing the tile. For the
problems whose tiles leave SMs idle and whose K is long (1024 x 1024 x 14336: 0.93x cuBLAS with
the second pass, RESULTS.md).

``cluster="single"`` is the same written-out pipeline in one block, with no partner: its
barriers local, no multicast. Why: where K is long the paired programs were 3-13% behind the
template (RESULTS.md, "Long K"), and the template's consumers, under TileLang's automatic warp
specialization, wait for each stage's MMAs to finish before they wait for the next stage
(``warpgroup_wait<0>``: TileLang declines an MMA left in flight there), where this program keeps
one stage's MMAs in flight. Without the pair, a probe tells which of the two differences costs.
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

import math
from typing import Any

# "single": the program without a partner. A value of the search's knob since it was measured
# ahead, with the chunked epilogue and a persistent loop (H100, 2026-12-06, scripts/cluster_probe.py
# set=chunked, each at the template's 128x256 tile, RESULTS.md): 1.035x cuBLAS at 8192x8192x256,
# where the pairs (m2, n2) ran 1.005x; and 0.995-1.025x at four long-K shapes, where the template
# ran 0.955-1.003x (0.8-4% behind it)
CLUSTERS = ("off", "m2", "n2", "k2", "single")
PROGRAMS = CLUSTERS[1:]
# epilogue="chunked" (the cluster program's alone): the tile stored this many columns at a time by
# TMA through two small staging buffers, so that at 128x256 four stages still fit (the whole-tile
# staging buffer of "smem" leaves room for three) and the stores overlap what follows
CHUNK = 64
SCHEDULES = ("cooperative", "pingpong")
# Registers per thread after the producer warp group gives its own back (setmaxnreg), with two
# consumer warp groups: 40 x 128 + 232 x 256 = 64,512 of the SM's 65,536, as CUTLASS's Hopper
# kernels split them; with one consumer group the launch bound already leaves it 255.
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232
# named barriers: 0 is __syncthreads, 1 and 2 each consumer group's epilogue, 3 and 4 the
# ping-pong order (a group waits on 3 + its index, the other arrives there)
ORDER_BARRIER = 3


def pass_configs(cluster: str, schedule: str = "cooperative") -> dict[str, Any]:
    """TileLang's pass configuration for the cluster program of ``cluster`` and ``schedule``."""
    configs: dict[str, Any] = {
        # every hazard between the warp groups is ordered by the pipeline's mbarriers and the named
        # barriers of the epilogue; TileLang's own pass would add a __syncthreads on each stage, which
        # the producer (still waiting for a stage) and the consumers (waiting for data) would deadlock on
        "tl.disable_thread_storage_sync": True,
    }
    if cluster == "k2" or schedule == "pingpong":
        # k2: the partner's partial sums land in the reduction buffer while this block may still be
        # in its main loop: TileLang must not lay that buffer over the stages, dead by then in program
        # order. Ping-pong: each consumer group's staging tile is written in its own branch, so
        # TileLang laid the two at one offset (both at byte 131072 of a 128x128x64 four-stage
        # kernel's shared memory), and one group's epilogue overwrote the other's tile while its TMA
        # store read it: wrong at K of 128 and 256 on an H200 (relative errors 0.17-0.66, 2026-12-03,
        # scripts/cluster_probe.py set=short_k), where a tile's main loop is shorter than the
        # other group's epilogue; right at K 512 and more, where the epilogues did not meet.
        configs["tl.disable_shared_memory_reuse"] = True
    return configs


# The stage barriers' wait: a try-wait in a loop with the hardware's own suspend time. TileLang's
# Barrier::wait passes a 10 ms suspend hint, and half the warps' stall samples sat in its sleeps
# (Nsight Compute, H200); cuBLAS's waits hint 50 us. With this wait every cluster kernel probed
# ran 1.1-3.8% faster than with TileLang's put back (scripts/cluster_probe.py waits=tl, H200,
# RESULTS.md). TileLang 0.1.15 offers no other wait, so the program brings this one (imported
# ahead of TileLang's own includes, hence its own).
SPIN_WAIT = ("#include <tl_templates/cuda/barrier.h>\n"
             "__device__ __forceinline__ void ts_spin_wait(const Barrier& b, uint32_t phase) { while (!b.try_wait(phase)) {} }\n")


def cluster_gemm_program(
    m: Any,
    n: int,
    k: int,
    dtype: str,
    layout: str,
    *,
    cluster: str,
    block_m: int,
    block_n: int,
    block_k: int,
    num_stages: int,
    threads: int,
    panel_size: int = 8,
    warp_policy: str = "square",
    epilogue: str = "direct",
    raster: Any = "row",
    persistent: bool = False,
    schedule: str = "cooperative",
    num_sms: int = 132,
    out_dtype: str | None = None,
    b_k: int | None = None,
) -> Any:
    """The program of one configuration; ``m`` a size or a TIR variable (M at run time).
    ``threads`` counts consumer threads, as with TileLang's warp specialization; the launch adds
    the producer warp group. ``panel_size``/``raster`` walk the grid of *pairs* in the order
    :func:`search_spaces.gemm.rasterized` gives single tiles.

    ``persistent`` launches at most one pair per two SMs, each looping over pairs in that order.
    The stage counter runs on across its tiles, so the producer loads the next tile's first
    stages while the consumers still store this one: the epilogue overlaps the next main loop.

    ``schedule``: ``cooperative`` (the consumer warp groups split each tile) or ``pingpong``
    (persistent, two consumer groups: each takes every other tile whole, so one group's main loop
    runs while the other stores; two named barriers hand the main loop from one to the other).

    ``cluster="k2"``: both blocks of a pair compute one tile, block 0 over the first half of the
    K tiles (the larger, for an odd count) and block 1 over the rest; no persistent loop.

    ``out_dtype``: C's dtype (default ``dtype``; float32 keeps the accumulators' precision).
    ``b_k``: B's extent along K where it is shorter than A's: B's K tiles then repeat, so the
    product is ``sum_r A[:, r*b_k' : (r+1)*b_k'] @ B`` with ``b_k'`` the K tiles ``b_k`` spans
    (``k`` a whole number of them). For einsum-sum's ``hi @ K^T + lo @ K^T`` as one GEMM over
    ``[hi | lo]`` without a second copy of K."""
    import tilelang.language as T

    from search_spaces.gemm import gemm_warp_policy, rasterized

    assert cluster in PROGRAMS, cluster
    policy = gemm_warp_policy(warp_policy)
    transpose_b = layout == "nt"
    out_dtype = out_dtype or dtype
    b_k = b_k or k
    b_shape = (n, b_k) if transpose_b else (b_k, n)
    b_tile = (block_n, block_k) if transpose_b else (block_k, block_n)
    static_m = isinstance(m, int)
    tiles_m = math.ceil(m / block_m) if static_m else T.ceildiv(m, block_m)
    tiles_n = math.ceil(n / block_n)
    k_iters = math.ceil(k / block_k)
    b_iters = math.ceil(b_k / block_k)  # B's own K tiles; A's walk takes them k_iters / b_iters times
    assert k_iters % b_iters == 0, "A's K tiles are a whole number of B's"
    consumers = threads // 128
    along_m, split, single = cluster == "m2", cluster == "k2", cluster == "single"
    size = 1 if single else 2  # blocks a cluster
    # the grid of pairs: whole pairs along the shared axis (k2: a pair is one tile; single: a block)
    pairs_m = (tiles_m + 1) // 2 if along_m else tiles_m
    pairs_n = tiles_n if along_m or split or single else (tiles_n + 1) // 2
    half = (k_iters + 1) // 2  # k2: rank 0's K tiles, rank 1 the rest
    pair_tiles = pairs_m * pairs_n
    clusters = min(pair_tiles, num_sms // size) if static_m else num_sms // size
    waves = math.ceil(pair_tiles / clusters) if static_m else T.ceildiv(pair_tiles, clusters)
    if single:
        grid, dims = ((clusters,) if persistent else (tiles_n, tiles_m)), None
    elif persistent:
        grid, dims = (clusters * 2,), (2, 1, 1)
    else:
        grid = (tiles_n, pairs_m * 2) if along_m else (pairs_n * 2, tiles_m)
        dims = (1, 2, 1) if along_m else (2, 1, 1)
    smem_out, chunked = epilogue == "smem", epilogue == "chunked"
    assert not chunked or block_n % CHUNK == 0, f"chunked: block_n a multiple of {CHUNK}"
    pingpong = schedule == "pingpong"
    assert not pingpong or (persistent and consumers == 2), "ping-pong: two consumer warp groups in a persistent loop"
    assert not split or not persistent, "k2: one tile per pair (its reduction barrier is used once)"
    tile_groups = 2 if pingpong else 1  # accumulators (and staging tiles): one per warp group that owns a tile

    def tile_of(pair: Any, rank: Any) -> tuple[Any, Any]:
        """The (M, N) tile of block ``rank`` of linear pair ``pair``."""
        pm, pn = rasterized(pair, pairs_m, pairs_n, panel_size, raster)
        if split or single:
            return pm, pn
        return (pm * 2 + rank, pn) if along_m else (pm, pn * 2 + rank)

    def k_range(rank: Any) -> tuple[Any, Any]:
        """The first K tile of block ``rank`` and how many it takes."""
        if not split:
            return 0, k_iters
        return rank * half, T.if_then_else(rank == 0, half, k_iters - half)

    @T.macro
    def release(empty, s):
        """The warp has waited for its MMAs on stage ``s`` (wgmma.wait_group is warp-aligned): one
        lane frees it in both blocks, as CUTLASS's pipelines do, not 32 arrives on one word."""
        if T.shuffle_elect(32):
            if split or single:  # each block loads its own tiles: the stage is its own to free
                T.mbarrier_arrive(empty[s])
            else:
                T.mbarrier_arrive(empty[s], 0)
                T.mbarrier_arrive(empty[s], 1)

    @T.macro
    def reduce(acc, red_s, red_bar, rank, wgs):
        """k2: block 1 stages its partial sums in shared memory and copies them in one bulk
        transfer into block 0's, whose barrier counts the bytes; block 0 adds them to its own.
        The staging buffer stays apart from the stages (:func:`pass_configs`): the copy lands while
        block 0 may still be in its main loop."""
        if rank == 1:
            T.copy(acc, red_s)
            T.fence_proxy_async()
            T.sync_threads(1 + wgs[0], 128 * len(wgs))
            T.copy_cluster(red_s, red_s, dst_block=0, remote_barrier=red_bar[0])
        else:
            T.mbarrier_wait_parity(red_bar[0], 0)
            for i, j in T.Parallel(block_m, block_n):
                acc[i, j] += red_s[i, j]

    @T.macro
    def produce(A, B, a_s, b_s, full, empty, tm, tn, base, rank):
        """The producer's loads for one tile; ``base`` counts the stages this block filled before it."""
        first, count = k_range(rank)
        for i in T.serial(count):
            g = base + i
            s = g % num_stages
            ko = first + i
            kb = ko % b_iters if b_iters < k_iters else ko
            T.call_extern("handle", "ts_spin_wait", empty[s], ((g // num_stages) % 2) ^ 1)
            a_src = A[tm * block_m:(tm + 1) * block_m, ko * block_k:(ko + 1) * block_k]
            if transpose_b:
                b_src = B[tn * block_n:(tn + 1) * block_n, kb * block_k:(kb + 1) * block_k]
            else:
                b_src = B[kb * block_k:(kb + 1) * block_k, tn * block_n:(tn + 1) * block_n]
            if split or single:
                T.tma_copy(a_src, a_s[s, :, :], barrier=full[s])
                T.tma_copy(b_src, b_s[s, :, :], barrier=full[s])
            elif along_m:
                T.tma_copy(a_src, a_s[s, :, :], barrier=full[s])
                T.tma_copy(b_src, b_s[s, :, :], barrier=full[s], cluster_mask=0b11)
            else:
                T.tma_copy(a_src, a_s[s, :, :], barrier=full[s], cluster_mask=0b11)
                T.tma_copy(b_src, b_s[s, :, :], barrier=full[s])
            T.mbarrier_arrive(full[s])

    @T.macro
    def consume(C, a_s, b_s, c_s, acc, full, empty, tm, tn, base, wgs, turn, rank, red_s, red_bar):
        """One output tile computed by the consumer warp groups ``wgs``, from the stages the
        producer filled after ``base``, and stored. ``turn`` (ping-pong) is the tile's place in
        the block's loop: the group waits until the other has waited for every stage of the tile
        before, and lets it go on once it has waited for its own. A stage barrier tells its
        phases apart by parity alone, so a group may wait on it at most one phase ahead: without
        this order the second group would wait a whole tile ahead and take the first's data."""
        if pingpong and turn > 0:
            T.sync_threads(ORDER_BARRIER + wgs[0], 256)
        T.clear(acc)
        first, count = k_range(rank)
        for i in T.serial(count):
            g = base + i
            s = g % num_stages
            T.call_extern("handle", "ts_spin_wait", full[s], (g // num_stages) % 2)
            # one stage's MMAs stay in flight while the next are issued, so the tensor cores do not
            # wait on the warp between stages; the stage before is then read and released
            T.wgmma_gemm(a_s[s, :, :], b_s[s, :, :], acc, transpose_B=transpose_b, policy=policy)
            T.wait_wgmma(1)
            if i > 0:
                release(empty, (g - 1) % num_stages)
        if pingpong:
            T.named_barrier_arrive(ORDER_BARRIER + 1 - wgs[0], 256)
        T.wait_wgmma(0)
        release(empty, (base + count - 1) % num_stages)
        if split:
            reduce(acc, red_s, red_bar, rank, wgs)
        if split and rank == 1:
            T.evaluate(0)  # its partial sums went to its partner, which stores the tile
        elif chunked:
            # CHUNK columns at a time through two staging buffers: a buffer is written again once
            # the store issued from it two chunks before has read it (the stores stay in flight
            # meanwhile, and across tiles into the next tile's main loop)
            for j in T.unroll(block_n // CHUNK):
                T.tma_store_wait(1)
                T.sync_threads(1 + wgs[0], 128 * len(wgs))
                for i, jj in T.Parallel(block_m, CHUNK):
                    c_s[j % 2, i, jj] = acc[i, j * CHUNK + jj]
                T.fence_proxy_async()
                T.sync_threads(1 + wgs[0], 128 * len(wgs))
                T.tma_copy(c_s[j % 2, :, :], C[tm * block_m:(tm + 1) * block_m,
                                                tn * block_n + j * CHUNK:tn * block_n + (j + 1) * CHUNK])
        elif smem_out:
            # the last tile's TMA store may still read the staging tile (one thread waits for it)
            T.sync_threads(1 + wgs[0], 128 * len(wgs))
            T.copy(acc, c_s)
            T.fence_proxy_async()
            T.sync_threads(1 + wgs[0], 128 * len(wgs))
            T.copy(c_s, C[tm * block_m, tn * block_n])
        else:
            T.copy(acc, C[tm * block_m, tn * block_n])

    def buffers():
        a_s = T.alloc_shared((num_stages, block_m, block_k), dtype)
        b_s = T.alloc_shared((num_stages,) + b_tile, dtype)
        staging = (2, block_m, CHUNK) if chunked else (block_m, block_n)
        c_s = [T.alloc_shared(staging, out_dtype) if smem_out or chunked else None for _ in range(tile_groups)]
        acc = [T.alloc_fragment((block_m, block_n), "float32") for _ in range(tile_groups)]
        full = T.alloc_barrier([128] * num_stages)
        if split:  # a lane of each consumer warp; the reduction's copy arrives once with its bytes
            empty = T.alloc_barrier([threads // 32] * num_stages)
            red_s, red_bar = T.alloc_shared((block_m, block_n), "float32"), T.alloc_cluster_barrier([1])
        elif single:  # a lane of each warp that consumes a stage, in this block alone
            empty = T.alloc_barrier([threads // tile_groups // 32] * num_stages)
            red_s, red_bar = None, None
        else:  # a lane of each warp that consumes a stage, in both blocks
            empty = T.alloc_cluster_barrier([threads // tile_groups // 32 * 2] * num_stages)
            red_s, red_bar = None, None
        return a_s, b_s, c_s, acc, full, empty, red_s, red_bar

    @T.macro
    def drain():
        """chunked: the block's last stores have read their staging buffers before it leaves."""
        if chunked:
            T.tma_store_wait(0)

    @T.macro
    def sync():
        """Every block of the cluster here (one block alone: its threads)."""
        if single:
            T.sync_threads()
        else:
            T.cluster_sync()

    # Each role runs its own loop (the producer's and each consumer group's), as CUTLASS's kernels
    # do: a tile's accumulators are written and read within one branch of one role, so ptxas sees
    # them dead between tiles (loops that interleave the roles per stage kept two ping-pong
    # accumulators live at once: 256 floats a thread, spilled).
    owners = [(0,), (1,)] if pingpong else [tuple(range(consumers))]

    if persistent:

        @T.prim_func
        def gemm_cluster_persistent(
            A: T.Tensor((m, k), dtype),
            B: T.Tensor(b_shape, dtype),
            C: T.Tensor((m, n), out_dtype),
        ):
            with T.Kernel(*grid, threads=threads + 128, cluster_dims=dims) as bx:
                T.import_source(SPIN_WAIT)
                a_s, b_s, c_s, acc, full, empty, red_s, red_bar = buffers()
                sync()  # both blocks' barriers exist before either arrives remotely
                with T.ws(consumers):
                    if consumers == 2:
                        T.dec_max_nreg(PRODUCER_REGISTERS)
                    for w in T.serial(waves):
                        pair = w * clusters + bx // size
                        if pair < pair_tiles:  # the same for both blocks of the pair
                            tm, tn = tile_of(pair, bx % size)
                            produce(A, B, a_s, b_s, full, empty, tm, tn, w * k_iters, bx % size)
                for i, wgs in enumerate(owners):
                    with T.ws(*wgs):
                        if consumers == 2:
                            T.inc_max_nreg(CONSUMER_REGISTERS)
                        for w in T.serial(waves):
                            pair = w * clusters + bx // size
                            # ping-pong: warp group w % 2 takes the tile
                            if pair < pair_tiles and (not pingpong or w % 2 == i):
                                tm, tn = tile_of(pair, bx % size)
                                consume(C, a_s, b_s, c_s[i], acc[i], full, empty, tm, tn, w * k_iters, wgs, w, bx % size,
                                        red_s, red_bar)
                        drain()
                sync()

        return gemm_cluster_persistent

    @T.prim_func
    def gemm_cluster(
        A: T.Tensor((m, k), dtype),
        B: T.Tensor(b_shape, dtype),
        C: T.Tensor((m, n), out_dtype),
    ):
        with T.Kernel(*grid, threads=threads + 128, cluster_dims=dims) as (bx, by):
            T.import_source(SPIN_WAIT)
            a_s, b_s, c_s, acc, full, empty, red_s, red_bar = buffers()
            rank = by % 2 if along_m else bx % size
            if along_m:
                tm, tn = tile_of(by // 2 * tiles_n + bx, rank)
            else:
                tm, tn = tile_of(by * pairs_n + bx // size, rank)
            sync()  # both blocks' barriers exist before either arrives remotely
            with T.ws(consumers):
                if consumers == 2:
                    T.dec_max_nreg(PRODUCER_REGISTERS)
                produce(A, B, a_s, b_s, full, empty, tm, tn, 0, rank)
            with T.ws(*range(consumers)):
                if consumers == 2:
                    T.inc_max_nreg(CONSUMER_REGISTERS)
                consume(C, a_s, b_s, c_s[0], acc[0], full, empty, tm, tn, 0, tuple(range(consumers)), 0, rank, red_s,
                        red_bar)
                drain()
            sync()

    return gemm_cluster
