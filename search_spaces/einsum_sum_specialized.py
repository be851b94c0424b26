"""The walk over K tiles of einsum-sum's ``reduce_stream`` with its warp groups specialized
(``epilogue="specialized"`` of :mod:`search_spaces.einsum_sum`).

Why: writing S is the whole cost of einsum-sum (268 MB in float32 at t=k=8192), and the fused
and stream kernels reach 77% of the time floor of that write in float32 and 54% in bfloat16
(RESULTS.md). In their walk one group of warps does everything in turn: the products of a tile,
moving it to shared memory, then the next tile's products, while the previous tiles' TMA stores
drain; the products and the staging of a tile never overlap the staging of another. Here a
producer warp group loads hi, lo and the K tiles by TMA, and two consumer warp groups take
every other tile of S each: while one computes its tile, the other stages and stores its own.

The protocol, all mbarriers (TileLang's thread-storage sync is off, as in the GEMM's cluster
program, whose ``__syncthreads`` would deadlock the roles):

- ``ready``: the producer's threads arrive once hi and lo have landed (the bytes are expected);
- per stage, ``full`` (the producer's threads arrive, the K tile's bytes expected) and ``empty``
  (one lane per warp of the consumer group that read it);
- ``num_stages`` is even, so group ``i`` only ever uses the stages of its own parity, in order:
  each stage barrier is waited on by one group, one phase after another (a group could otherwise
  wait a phase ahead, which a parity wait cannot tell from the phase before);
- each group stages its tile in a buffer of its own, and waits for its previous store to have
  read that buffer (the issuing thread's ``tma_store_wait``, then a named barrier of the group).
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

from typing import Any

# setmaxnreg's split of an SM's registers between the producer and two consumer groups
from search_spaces.gemm_cluster import CONSUMER_REGISTERS, PRODUCER_REGISTERS

THREADS = 384  # a producer warp group and two consumer groups
PASS_CONFIGS = {
    "tl.disable_thread_storage_sync": True,
    # the two groups' staging buffers are live at once, in branches TileLang sees as apart
    "tl.disable_shared_memory_reuse": True,
}


def stream_specialized_program(
    t: int,
    k: int,
    h: int,
    d: int,
    dtype: str,
    out_dtype: str,
    *,
    block_t: int,
    block_k: int,
    num_stages: int,
    k_split: int,
    dp: int,
) -> Any:
    """Second kernel of ``reduce_stream`` with specialized warp groups: ``S[rows, cols] =
    hi @ K[cols]^T + lo @ K[cols]^T`` for the ``ceil(k_tiles / k_split)`` consecutive K tiles of
    split ``bx``; ``dp`` is d padded as the workspace holds it."""
    import tilelang.language as T

    assert num_stages % 2 == 0, "each consumer group keeps to the stages of its own parity"
    k_tiles = -(-k // block_k)
    per_block = -(-k_tiles // k_split)
    splits = -(-k_tiles // per_block)

    @T.macro
    def compute_and_store(hi, lo, k_s, s_s, acc, full, empty, ready, S, bx, by, group):
        """Every other tile of the split, from ``group``'s first."""
        T.mbarrier_wait_parity(ready[0], 0)
        for j in T.serial((per_block - group + 1) // 2):
            step = group + 2 * j
            s = step % num_stages
            col = (bx * per_block + step) * block_k
            T.mbarrier_wait_parity(full[s], (step // num_stages) % 2)
            T.clear(acc)
            T.gemm(hi, k_s[s, :, :], acc, transpose_B=True)
            T.gemm(lo, k_s[s, :, :], acc, transpose_B=True)
            if T.shuffle_elect(32):  # the warp has waited for its products: one lane frees the stage
                T.mbarrier_arrive(empty[s])
            T.tma_store_wait(0)  # this group's last store has read its staging buffer
            T.sync_threads(1 + group, 128)
            T.copy(acc, s_s)
            T.fence_proxy_async()
            T.sync_threads(1 + group, 128)
            T.tma_copy(s_s, S[by * block_t : (by + 1) * block_t, col : col + block_k], eviction_policy="evict_first")
        T.tma_store_wait(0)

    @T.prim_func
    def einsum_sum_stream_specialized(
        Hi: T.Tensor((t, dp), dtype),
        Lo: T.Tensor((t, dp), dtype),
        K: T.Tensor((k, d), dtype),
        S: T.Tensor((t, k), out_dtype),
    ):
        with T.Kernel(splits, T.ceildiv(t, block_t), threads=THREADS) as (bx, by):
            hi = T.alloc_shared((block_t, dp), dtype)
            lo = T.alloc_shared((block_t, dp), dtype)
            k_s = T.alloc_shared((num_stages, block_k, dp), dtype)
            s_s0 = T.alloc_shared((block_t, block_k), out_dtype)
            s_s1 = T.alloc_shared((block_t, block_k), out_dtype)
            acc0 = T.alloc_fragment((block_t, block_k), "float32")
            acc1 = T.alloc_fragment((block_t, block_k), "float32")
            ready = T.alloc_barrier([128])
            full = T.alloc_barrier([128] * num_stages)
            empty = T.alloc_barrier([4] * num_stages)  # a lane of each warp of the group that read it
            with T.ws(2):
                T.dec_max_nreg(PRODUCER_REGISTERS)
                T.tma_copy(Hi[by * block_t : (by + 1) * block_t, 0:dp], hi, barrier=ready[0])
                T.tma_copy(Lo[by * block_t : (by + 1) * block_t, 0:dp], lo, barrier=ready[0])
                T.mbarrier_arrive(ready[0])
                for step in T.serial(per_block):
                    s = step % num_stages
                    col = (bx * per_block + step) * block_k
                    T.mbarrier_wait_parity(empty[s], ((step // num_stages) % 2) ^ 1)
                    T.tma_copy(K[col : col + block_k, 0:dp], k_s[s, :, :], barrier=full[s])
                    T.mbarrier_arrive(full[s])
            with T.ws(0):
                T.inc_max_nreg(CONSUMER_REGISTERS)
                compute_and_store(hi, lo, k_s, s_s0, acc0, full, empty, ready, S, bx, by, 0)
            with T.ws(1):
                T.inc_max_nreg(CONSUMER_REGISTERS)
                compute_and_store(hi, lo, k_s, s_s1, acc1, full, empty, ready, S, bx, by, 1)

    return einsum_sum_stream_specialized
