"""Grouped GEMM as in a mixture-of-experts layer: ``Y_e = X_e @ W_e.T`` for each expert ``e``.

The rows routed to each expert are stored one expert after another in ``X [tokens, k]`` (as after
the permutation of an MoE layer); the weights ``W [experts, n, k]`` are stored ``n x k`` per
expert (nt, as ``nn.Linear`` keeps them); ``Y [tokens, n]`` in the input dtype (bfloat16 or
float16), float32 accumulation. How many rows each expert gets is the ``routing`` of
``tokens`` rows over ``experts``: ``even``, or ``skewed`` (expert ``e`` gets a share proportional to
``1 / sqrt(e + 1)``, as a router favouring a few experts does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from search_spaces.gemm import output_tolerance, registers
from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.space import Categorical, Config, IntRange, PowerOfTwo, Space
from tilesearch.target import Target
from tilesearch_grouped_gemm import model

DTYPES = ("bfloat16", "float16")
ROUTINGS = ("skewed", "even")
WARP_POLICIES = ("square", "full_row", "full_col")
RASTERS = ("m_fastest", "n_fastest")
EPILOGUES = ("direct", "smem")


def expert_rows(tokens: int, experts: int, routing: str) -> tuple[int, ...]:
    """Rows routed to each expert (they sum to ``tokens``; an expert may get none)."""
    weights = [1.0] * experts if routing == "even" else [1 / math.sqrt(e + 1) for e in range(experts)]
    total = sum(weights)
    rows = [math.floor(tokens * w / total) for w in weights]
    for e in range(tokens - sum(rows)):  # the remainder, one row each to the first experts
        rows[e % experts] += 1
    return tuple(rows)


def smem_bytes(config: Mapping[str, Any]) -> int:
    c = config
    operands = c["num_stages"] * (c["block_m"] + c["block_n"]) * c["block_k"] * 2
    return operands + (c["block_m"] * c["block_n"] * 2 if c["epilogue"] == "smem" else 0)


class GroupedGemmOp(Operator):
    """MoE expert GEMMs in one launch."""

    name = "grouped_gemm"
    description = "Y_e = X_e @ W_e.T per expert e (MoE layer); bf16/fp16 in, fp32 accumulate, rows per expert differ"
    params = (
        Param("experts", int, minimum=1, help="number of experts (groups)"),
        Param("tokens", int, minimum=1, help="rows routed to all experts together"),
        Param("n", int, minimum=1, help="output features (rows of each W_e)"),
        Param("k", int, minimum=1, help="input features (reduction length)"),
        Param("dtype", str, default="bfloat16", choices=DTYPES),
        Param("routing", str, default="skewed", choices=ROUTINGS, help="how tokens spread over the experts"),
    )
    examples = (
        dict(experts=4, tokens=512, n=256, k=256),
        dict(experts=5, tokens=301, n=200, k=136, dtype="float16"),
        dict(experts=8, tokens=6, n=72, k=40, routing="even"),  # experts with no rows
    )

    def sizes(self, problem: Mapping[str, Any]) -> tuple[int, ...]:
        return expert_rows(problem["tokens"], problem["experts"], problem["routing"])

    def space(self, problem: Problem, target: Target) -> Space:
        k_tiles = {bk: math.ceil(problem["k"] / bk) for bk in (32, 64, 128)}
        limit = target.smem_per_block

        def shared_memory(c: Mapping[str, Any]) -> str | None:
            used = smem_bytes(c)
            return f"shared memory: {used} B > {limit} B per block" if used > limit else None

        def stages(c: Mapping[str, Any]) -> str | None:
            steps = k_tiles[c["block_k"]]
            if c["num_stages"] > max(steps, 1) and c["num_stages"] > 1:
                return f"pipeline: {c['num_stages']} stages for {steps} K tiles (same kernel as fewer stages)"
            return None

        knobs = [
            PowerOfTwo("block_m", 64, 256),
            PowerOfTwo("block_n", 64, 256),
            PowerOfTwo("block_k", 32, 128),
            IntRange("num_stages", 1, 5),
            Categorical("threads", (128, 256)),
            Categorical("warp_policy", WARP_POLICIES),
            Categorical("raster", RASTERS),
            Categorical("epilogue", EPILOGUES),
        ]
        return Space(knobs, [shared_memory, registers, stages])

    def program(self, problem: Problem, config: Config, target: Target) -> Any:
        from tilesearch_grouped_gemm.template import grouped_gemm_program

        return grouped_gemm_program(self.sizes(problem), problem["n"], problem["k"], problem["dtype"], **config)

    def make_inputs(self, problem: Problem, device: Any, generator: Any) -> tuple[Any, ...]:
        import torch

        dtype = getattr(torch, problem["dtype"])
        p = problem
        x = torch.randn((p["tokens"], p["k"]), device=device, generator=generator, dtype=torch.float32).to(dtype)
        w = torch.randn((p["experts"], p["n"], p["k"]), device=device, generator=generator, dtype=torch.float32)
        return x, w.to(dtype)

    def make_outputs(self, problem: Problem, device: Any) -> tuple[Any, ...]:
        import torch

        return (torch.empty((problem["tokens"], problem["n"]), device=device, dtype=getattr(torch, problem["dtype"])),)

    def reference(self, problem: Problem, inputs: Sequence[Any]) -> tuple[Any, ...]:
        import torch

        x, w = inputs
        y = torch.empty((problem["tokens"], problem["n"]), device=x.device, dtype=torch.float64)
        row = 0
        for e, rows in enumerate(self.sizes(problem)):  # one expert at a time: W in float64 is large
            y[row:row + rows] = x[row:row + rows].to(torch.float64) @ w[e].to(torch.float64).T
            row += rows
        return (y,)

    def baseline(self, problem: Problem, inputs: Sequence[Any]) -> Any:
        """The best PyTorch offers: :func:`grouped_mm_baseline` where it runs, else
        :func:`matmul_loop_baseline`."""
        return grouped_mm_baseline(problem, inputs) or matmul_loop_baseline(problem, inputs)

    def flops(self, problem: Problem) -> float:
        return 2.0 * problem["tokens"] * problem["n"] * problem["k"]

    def bytes(self, problem: Problem) -> float:
        used = sum(1 for rows in self.sizes(problem) if rows)  # an expert without rows is not read
        p = problem
        return float((p["tokens"] * p["k"] + used * p["n"] * p["k"] + p["tokens"] * p["n"]) * 2)

    def tolerance(self, problem: Problem, config: Config) -> Tolerance:
        return output_tolerance(problem["dtype"])  # the same rounding as GEMM's output

    # -- performance knowledge (model.py) --

    def features(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
        return model.features(self.sizes(problem), problem, config, target)

    def estimate(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> float:
        return model.estimate(self.sizes(problem), problem, config, target)


def grouped_mm_baseline(problem: Mapping[str, Any], inputs: Sequence[Any]) -> Any:
    """``torch._grouped_mm`` (one grouped launch in cuBLAS/CUTLASS) as a no-argument callable, or
    ``None`` where this torch lacks it or refuses these inputs (it takes bfloat16 only, on sm_90
    and later, with rows of 16-byte multiples; CUDA tensors only)."""
    import torch

    x, w = inputs
    grouped = getattr(torch, "_grouped_mm", None)
    if grouped is None or not x.is_cuda:
        return None
    sizes = expert_rows(problem["tokens"], problem["experts"], problem["routing"])
    offsets = torch.tensor(list(_prefix(sizes)), device=x.device, dtype=torch.int32)
    w_kn = w.transpose(1, 2)  # [experts, k, n], column-major: W as stored

    def run() -> Any:
        return grouped(x, w_kn, offs=offsets)

    try:
        run()
        torch.cuda.synchronize(x.device)
    except (RuntimeError, TypeError, ValueError):
        return None
    return run


def matmul_loop_baseline(problem: Mapping[str, Any], inputs: Sequence[Any]) -> Any:
    """One ``torch.matmul`` per expert with rows, into one output tensor."""
    import torch

    x, w = inputs
    sizes = expert_rows(problem["tokens"], problem["experts"], problem["routing"])
    out = torch.empty((problem["tokens"], problem["n"]), device=x.device, dtype=x.dtype)
    slices = [(e, slice(end - rows, end)) for e, (rows, end) in enumerate(zip(sizes, _prefix(sizes))) if rows]

    def loop() -> Any:
        for e, rows in slices:
            torch.matmul(x[rows], w[e].T, out=out[rows])
        return out

    return loop


def _prefix(sizes: Sequence[int]) -> Any:
    total = 0
    for rows in sizes:
        total += rows
        yield total
