"""GEMM: ``C = A @ B`` (``layout=nn``, B is K x N) or ``C = A @ B.T`` (``layout=nt``, B is N x K).

float16 or bfloat16 inputs, float32 accumulation, output in the input dtype, any M, N, K >= 1.
The template is TileLang's pipelined Hopper GEMM: a block computes a ``block_m x block_n`` tile,
staging ``block_k``-wide slices of A and B through shared memory ``num_stages`` deep; blocks are
rasterized in panels of ``panel_size`` (0: row-major launch order). Edges that are not multiples
of a tile are predicated by TileLang's copies.
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

from collections.abc import Mapping, Sequence
from typing import Any

from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.space import Categorical, Config, IntRange, PowerOfTwo, Space
from tilesearch.target import Target

DTYPES = ("float16", "bfloat16")
LAYOUTS = ("nn", "nt")
WARP_POLICIES = ("square", "full_row", "full_col")
MAX_ACCUMULATORS_PER_THREAD = 128  # float32 registers; more spills on sm_90


def element_bytes(dtype: str) -> int:
    return 2


def smem_bytes(config: Mapping[str, Any], dtype: str) -> int:
    """Shared memory of the operand pipeline: ``num_stages`` slices of A and of B."""
    c = config
    return c["num_stages"] * (c["block_m"] * c["block_k"] + c["block_k"] * c["block_n"]) * element_bytes(dtype)


def constraints(dtype: str, target: Target) -> list[Any]:
    limit = target.smem_per_block

    def shared_memory(c: Mapping[str, Any]) -> str | None:
        used = smem_bytes(c, dtype)
        return f"shared memory: {used} B > {limit} B per block" if used > limit else None

    def registers(c: Mapping[str, Any]) -> str | None:
        acc = c["block_m"] * c["block_n"] // c["threads"]
        if acc > MAX_ACCUMULATORS_PER_THREAD:
            return f"registers: {acc} float32 accumulators per thread > {MAX_ACCUMULATORS_PER_THREAD}"
        return None

    return [shared_memory, registers]


class GemmOp(Operator):
    """Dense matrix product on tensor cores."""

    name = "gemm"
    description = "C = A @ B (nn) or A @ B.T (nt); fp16/bf16 in, fp32 accumulate, output in input dtype"
    params = (
        Param("m", int, minimum=1, help="rows of A and C"),
        Param("n", int, minimum=1, help="columns of C"),
        Param("k", int, minimum=1, help="reduction length"),
        Param("dtype", str, default="float16", choices=DTYPES),
        Param("layout", str, default="nn", choices=LAYOUTS, help="nn: B is KxN; nt: B is NxK"),
    )

    def space(self, problem: Problem, target: Target) -> Space:
        knobs = [
            PowerOfTwo("block_m", 64, 256),
            PowerOfTwo("block_n", 64, 256),
            PowerOfTwo("block_k", 32, 128),
            IntRange("num_stages", 1, 5),
            Categorical("threads", (128, 256)),
            Categorical("panel_size", (0, 4, 8, 16)),
            Categorical("warp_policy", WARP_POLICIES),
        ]
        return Space(knobs, constraints(problem["dtype"], target))

    def program(self, problem: Problem, config: Config) -> Any:
        return gemm_program(
            problem["m"], problem["n"], problem["k"], problem["dtype"], problem["layout"], **config
        )

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
        # the output is rounded to 16 bits: unit roundoff 2^-11 (fp16) or 2^-8 (bf16), 4x margin
        if problem["dtype"] == "float16":
            return Tolerance(rel_fro=2e-3, max_rel=2e-3)
        return Tolerance(rel_fro=1.6e-2, max_rel=1.6e-2)


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
) -> Any:
    """The GEMM tile program for one configuration (a TileLang ``PrimFunc``)."""
    import tilelang.language as T

    policy = {
        "square": T.GemmWarpPolicy.Square,
        "full_row": T.GemmWarpPolicy.FullRow,
        "full_col": T.GemmWarpPolicy.FullCol,
    }[warp_policy]
    transpose_b = layout == "nt"
    b_shape = (n, k) if transpose_b else (k, n)
    b_tile = (block_n, block_k) if transpose_b else (block_k, block_n)

    @T.prim_func
    def gemm(
        A: T.Tensor((m, k), dtype),
        B: T.Tensor(b_shape, dtype),
        C: T.Tensor((m, n), dtype),
    ):
        with T.Kernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=threads) as (bx, by):
            a_tile = T.alloc_shared((block_m, block_k), dtype)
            b_tile_s = T.alloc_shared(b_tile, dtype)
            acc = T.alloc_fragment((block_m, block_n), "float32")
            T.use_swizzle(panel_size=max(panel_size, 1), enable=panel_size > 0)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=num_stages):
                T.copy(A[by * block_m, ko * block_k], a_tile)
                if transpose_b:
                    T.copy(B[bx * block_n, ko * block_k], b_tile_s)
                else:
                    T.copy(B[ko * block_k, bx * block_n], b_tile_s)
                T.gemm(a_tile, b_tile_s, acc, transpose_B=transpose_b, policy=policy)
            T.copy(acc, C[by * block_m, bx * block_n])

    return gemm
