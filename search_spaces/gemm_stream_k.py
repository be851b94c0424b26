"""The GEMM tile program with a stream-K tail (``stream_k`` knob of :mod:`search_spaces.gemm`).

Why: a persistent GEMM of ``tiles`` output tiles on ``S`` SMs runs ``ceil(tiles / S)`` waves, and
the last one is as long as the others however few tiles it holds. At 784 x 6144 x 4096 (a Llama-3
qkv projection of 784 tokens) 128 x 192 tiles make 224 blocks on 132 SMs: the second wave is 70%
full, and the tuned kernel ran at 0.79x ``torch.matmul`` while cuBLAS kept the rate it has at 2657
rows (H200, RESULTS.md "Deploy"). Today's split-K cannot help there: it splits every tile, and is
pruned once the tiles fill the SMs.

So the full waves run as whole tiles, and only the last, partial wave is spread over every SM in
K: its ``tail x k_tiles`` iterations (``tail = tiles mod S``) are dealt out evenly, as contiguous
runs, to ``min(S, tail x stream_k)`` blocks, which take them first; then every block takes its
whole tiles of the full waves, the same number each. A run crosses at most one tile boundary (it
is at most one tile long), so a block holds at most two pieces of tail tiles.

The fix-up, inside the kernel: a piece that is not a whole tile writes its float32 partial sums
to the workspace ``W`` (one slot per block and piece), then the block counts itself in on the
tile's counter in ``S`` (one thread, after a fence). The block that arrives last adds the other
pieces' sums to its own, stores the tile, and sets the counter back to zero for the next call.
No block waits for another, so no order of the blocks on the GPU can hang it (unlike a fix-up
where a tile's first block waits for the rest); the price is that every piece of a tail tile
passes through L2 once. TileLang's own stream-K example instead adds every piece into a zeroed
``C`` with atomics, which is not deterministic and rounds each piece to the output type.

The pipeline is written out, as in :mod:`search_spaces.gemm_cluster` (whose stage wait and
register split it shares): one producer warp group loads every stage of every piece and tile in
the same order the consumer warp groups use them, one stage counter running across them, so the
producer loads the next piece while the consumers fix up or store this one.
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

import math
from typing import Any

from search_spaces.gemm_cluster import CONSUMER_REGISTERS, PRODUCER_REGISTERS, SPIN_WAIT

STREAM_K = (1, 2, 3, 4)  # most blocks that share one tail tile's K (1: no stream-K tail)
# a fence before the counter's increment (this block's partial sums visible to the GPU) and after
# it (the others' visible to this block), as CUTLASS's split-K semaphores order them
FENCE = "__device__ __forceinline__ void ts_fence() { __threadfence(); }\n"
EPILOGUE_BARRIER = 1  # named barrier of the consumer warp groups (0 is __syncthreads)


def workspace_shapes(block_m: int, block_n: int, num_sms: int) -> tuple[tuple[int, int], tuple[int]]:
    """The float32 partial sums (two pieces a block: rows ``(block x 2 + piece) x block_m``) and
    one int32 counter a tail tile (fewer than ``num_sms`` tail tiles). Whatever M is: a kernel of
    a run-time M uses the same workspaces at every size."""
    return (num_sms * 2 * block_m, block_n), (num_sms,)


def tail_run(b: Any, blocks: Any, iters: Any) -> tuple[Any, Any]:
    """The tail iterations ``[first, end)`` of block ``b`` when ``iters`` are dealt to ``blocks``
    (empty past ``blocks``: the block index is clamped there rather than tested, which keeps the
    generated index arithmetic one expression). Integers or TIR expressions."""
    import tilelang.language as T

    share = T.max(blocks, 1)
    return T.min(b, blocks) * iters // share, T.min(b + 1, blocks) * iters // share


def tail_owner(x: Any, blocks: Any, iters: Any) -> Any:
    """The block whose run holds tail iteration ``x``: the last whose run starts at or before it
    (``b x iters // blocks <= x`` exactly while ``b < (x + 1) x blocks / iters``). With at least
    one iteration a block, every block from one tile's first owner to its last has a piece of it."""
    import tilelang.language as T

    return T.ceildiv((x + 1) * blocks, iters) - 1


def pass_configs() -> dict[str, Any]:
    """TileLang's pass configuration: the warp groups are ordered by the program's barriers (as
    in the cluster program, TileLang's own __syncthreads per stage would deadlock the producer);
    every access is in bounds by construction (TMA clips the operands' loads and C's stores, the
    direct epilogue's copy predicates its own), and TileLang's guard on each fix-up load kept
    them from being issued together."""
    return {"tl.disable_thread_storage_sync": True, "tl.disable_safe_memory_legalize": True}


def stream_k_gemm_program(
    m: Any,
    n: int,
    k: int,
    dtype: str,
    layout: str,
    *,
    stream_k: int,
    block_m: int,
    block_n: int,
    block_k: int,
    num_stages: int,
    threads: int,
    panel_size: int = 8,
    warp_policy: str = "square",
    epilogue: str = "direct",
    raster: str = "row",
    num_sms: int = 132,
) -> Any:
    """The program of one configuration; ``m`` a size or a TIR variable (M at run time).
    ``threads`` counts the consumer threads; the launch adds the producer warp group. Tiles are
    numbered in the order :func:`search_spaces.gemm.rasterized` gives; the tail is the first
    ``tiles mod num_sms`` of them. Takes ``A, B, W, S, C`` (:func:`workspace_shapes`; ``S``
    zero before the first call, and left zero by every call)."""
    import tilelang.language as T

    from search_spaces.gemm import gemm_warp_policy, rasterized

    assert stream_k in STREAM_K[1:], stream_k
    policy = gemm_warp_policy(warp_policy)
    transpose_b = layout == "nt"
    b_shape = (n, k) if transpose_b else (k, n)
    b_tile = (block_n, block_k) if transpose_b else (block_k, block_n)
    static_m = isinstance(m, int)
    tiles_m = math.ceil(m / block_m) if static_m else T.ceildiv(m, block_m)
    tiles_n = math.ceil(n / block_n)
    tiles = tiles_m * tiles_n
    k_tiles = math.ceil(k / block_k)
    consumers = threads // 128
    workers = num_sms
    tail = tiles % workers
    rounds = tiles // workers  # whole tiles per block
    sk_blocks = T.min(tail * stream_k, workers)  # blocks that share the tail
    sk_iters = tail * k_tiles
    (w_rows, w_cols), s_shape = workspace_shapes(block_m, block_n, num_sms)
    smem_out = epilogue == "smem"

    def run(b: Any) -> tuple[Any, Any]:
        return tail_run(b, sk_blocks, sk_iters)

    def owner(x: Any) -> Any:
        return tail_owner(x, sk_blocks, sk_iters)

    def piece(b: Any, p: int) -> tuple[Any, Any, Any]:
        """Piece ``p`` (0 or 1) of block ``b``'s run: its tile and its K tiles ``[lo, hi)``
        counted along the whole tail (empty where ``lo >= hi``)."""
        first, end = run(b)
        t = first // k_tiles + p
        return t, T.max(first, t * k_tiles), T.min(end, (t + 1) * k_tiles)

    @T.macro
    def release(empty, s):
        if T.shuffle_elect(32):  # a lane of each consumer warp
            T.mbarrier_arrive(empty[s])

    @T.macro
    def produce(A, B, a_s, b_s, full, empty, t, first, count, base):
        """The loads of ``count`` K tiles of tile ``t`` from K tile ``first``; ``base`` counts the
        stages this block filled before."""
        tm, tn = rasterized(t, tiles_m, tiles_n, panel_size, raster)
        for i in T.serial(count):
            g = base + i
            s = g % num_stages
            ko = first + i
            T.call_extern("handle", "ts_spin_wait", empty[s], ((g // num_stages) % 2) ^ 1)
            T.tma_copy(A[tm * block_m:(tm + 1) * block_m, ko * block_k:(ko + 1) * block_k], a_s[s, :, :],
                       barrier=full[s])
            if transpose_b:
                T.tma_copy(B[tn * block_n:(tn + 1) * block_n, ko * block_k:(ko + 1) * block_k], b_s[s, :, :],
                           barrier=full[s])
            else:
                T.tma_copy(B[ko * block_k:(ko + 1) * block_k, tn * block_n:(tn + 1) * block_n], b_s[s, :, :],
                           barrier=full[s])
            T.mbarrier_arrive(full[s])

    @T.macro
    def accumulate(a_s, b_s, acc, full, empty, count, base):
        T.clear(acc)
        for i in T.serial(count):
            g = base + i
            s = g % num_stages
            T.call_extern("handle", "ts_spin_wait", full[s], (g // num_stages) % 2)
            # one stage's MMAs stay in flight while the next are issued; the stage before is then released
            T.wgmma_gemm(a_s[s, :, :], b_s[s, :, :], acc, transpose_B=transpose_b, policy=policy)
            T.wait_wgmma(1)
            if i > 0:
                release(empty, (g - 1) % num_stages)
        T.wait_wgmma(0)
        release(empty, (base + count - 1) % num_stages)

    @T.macro
    def store(C, c_s, acc, t):
        tm, tn = rasterized(t, tiles_m, tiles_n, panel_size, raster)
        if smem_out:
            # the last tile's TMA store may still read the staging tile (one thread waits for it)
            T.sync_threads(EPILOGUE_BARRIER, threads)
            T.copy(acc, c_s)
            T.fence_proxy_async()
            T.sync_threads(EPILOGUE_BARRIER, threads)
            T.copy(c_s, C[tm * block_m, tn * block_n])
        else:
            T.copy(acc, C[tm * block_m, tn * block_n])

    @T.macro
    def fix_up(C, W, S, c_s, acc, last, row, b, p, t):
        """Piece ``p`` of block ``b``, a part of tail tile ``t``: its sums to ``W``; the block that
        counts in last on ``S[t]`` adds the others' and stores the tile."""
        T.copy(acc, W[(b * 2 + p) * block_m, 0])
        T.sync_threads(EPILOGUE_BARRIER, threads)
        w0, w1 = owner(t * k_tiles), owner(t * k_tiles + k_tiles - 1)
        if T.shuffle_elect(threads):
            T.call_extern("handle", "ts_fence")
            last[0] = T.if_then_else(T.atomic_add(S[t], 1, return_prev=True) == w1 - w0, 1, 0)
            if last[0] == 1:
                S[t] = 0
                T.call_extern("handle", "ts_fence")
        T.sync_threads(EPILOGUE_BARRIER, threads)
        if last[0] == 1:
            for j in T.serial(w1 - w0 + 1):
                other = w0 + j
                if other != b:
                    # the tile is the other block's second piece where its run began in the tile
                    # before; its first row worked out once, into a register of its own (as an
                    # expression in the loop, TileLang guarded and widened every load)
                    row[0] = (other * 2 + T.if_then_else(run(other)[0] < t * k_tiles, 1, 0)) * block_m
                    for i, jj in T.Parallel(block_m, block_n):
                        acc[i, jj] += W[row[0] + i, jj]
            store(C, c_s, acc, t)

    @T.prim_func
    def gemm_stream_k(
        A: T.Tensor((m, k), dtype),
        B: T.Tensor(b_shape, dtype),
        W: T.Tensor((w_rows, w_cols), "float32"),
        S: T.Tensor(s_shape, "int32"),
        C: T.Tensor((m, n), dtype),
    ):
        with T.Kernel(workers, threads=threads + 128) as b:
            T.import_source(SPIN_WAIT + FENCE)
            a_s = T.alloc_shared((num_stages, block_m, block_k), dtype)
            b_s = T.alloc_shared((num_stages,) + b_tile, dtype)
            c_s = T.alloc_shared((block_m, block_n), dtype) if smem_out else None
            acc = T.alloc_fragment((block_m, block_n), "float32")
            last = T.alloc_shared((1,), "int32")
            row = T.alloc_local((1,), "int32")
            full = T.alloc_barrier([128] * num_stages)
            empty = T.alloc_barrier([threads // 32] * num_stages)
            first, end = run(b)
            with T.ws(consumers):
                if consumers == 2:
                    T.dec_max_nreg(PRODUCER_REGISTERS)
                for p in T.serial(2):
                    t, lo, hi = piece(b, p)
                    if lo < hi:
                        produce(A, B, a_s, b_s, full, empty, t, lo - t * k_tiles, hi - lo, lo - first)
                for r in T.serial(rounds):
                    produce(A, B, a_s, b_s, full, empty, tail + r * workers + b, 0, k_tiles,
                            end - first + r * k_tiles)
            with T.ws(*range(consumers)):
                if consumers == 2:
                    T.inc_max_nreg(CONSUMER_REGISTERS)
                for p in T.serial(2):
                    t, lo, hi = piece(b, p)
                    if lo < hi:
                        accumulate(a_s, b_s, acc, full, empty, hi - lo, lo - first)
                        # a piece that is a whole tile (rare: a run of exactly a tile's length that
                        # starts with it) is its tile's only piece, and the first to count in is last
                        fix_up(C, W, S, c_s, acc, last, row, b, p, t)
                for r in T.serial(rounds):
                    accumulate(a_s, b_s, acc, full, empty, k_tiles, end - first + r * k_tiles)
                    store(C, c_s, acc, tail + r * workers + b)

    return gemm_stream_k
