"""Einsum-sum: ``S = torch.einsum('thd,kd->thk', Q, K).sum(dim=1)``, i.e.
``S[t, k] = sum_h sum_d Q[t, h, d] K[k, d]``.

Q is ``[t, h, d]``, K is ``[k, d]``, both float16 or bfloat16; S is ``[t, k]`` in float32 (default)
or in the input dtype. Any t, k, h, d >= 1: edges that are not multiples of a tile are predicated
by TileLang's copies (out-of-range loads read zeros, out-of-range stores are skipped).

Three algorithms behind the ``algorithm`` knob, searched in one space:

- ``direct``: a block owns a ``block_t x block_k`` tile of S and accumulates the h products
  ``Q[rows, h, :] @ K[cols, :]^T`` on tensor cores in float32, ``block_d`` columns of d at a time.
  h times the arithmetic of the others; float32 accumulation throughout.
- ``reduce_first``: ``S = (sum_h Q) @ K^T`` in two kernels. The first sums Q over h in float32 and
  splits each sum x into ``hi = 16bit(x)`` and ``lo = 16bit(x - hi)`` (written to a workspace); the
  second is a GEMM that accumulates ``hi @ K^T + lo @ K^T`` in float32. hi + lo carries 16
  significant bits (bfloat16) or 22 (float16) of the float32 sum, so the result keeps float32-class
  accuracy while the products stay on 16-bit tensor cores.
- ``fused``: the same arithmetic in one kernel. A block sums its ``block_t`` query rows over h
  into shared-memory hi/lo tiles once, then walks its share of the K tiles (all of them when
  ``k_split`` is 1), writing one ``block_t x block_k`` tile of S per step; the write of S, which
  dominates the cost, streams while the next K tile loads.
- ``reduce_stream``: reduce_first's reduce kernel, then fused's walk over K tiles with hi/lo
  loaded from the workspace: Q is read once in all (fused reads it once per split of k), and
  the walk's prologue is a short load instead of a sum over h.
- ``reduce_cluster``: reduce_first's products as one GEMM of the GEMM operator's persistent
  cluster program, whose consumer warp groups take turns storing tiles of S
  (:mod:`search_spaces.einsum_sum_cluster`).

Knobs that an algorithm does not use are pinned to their first value by constraints ("irrelevant
for algorithm ..."), so the space enumerates each distinct kernel once.
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

import functools
import os
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from search_spaces import einsum_sum_cluster as cluster
from search_spaces.einsum_sum_specialized import PASS_CONFIGS as SPECIALIZED_PASS_CONFIGS
from search_spaces.einsum_sum_specialized import stream_specialized_program
from tilesearch.composite import Composite, Launch, Workspace
from tilesearch.op import Operator, Param, Problem, ProblemError, Tolerance
from tilesearch.space import Categorical, Config, IntRange, PowerOfTwo, Space
from tilesearch.target import Target

DTYPES = ("bfloat16", "float16")
OUT_DTYPES = ("float32", "bfloat16", "float16")
ALGORITHMS = ("direct", "reduce_first", "fused", "reduce_stream", "reduce_cluster")
WALKS_K = ("fused", "reduce_stream")  # kernels whose main loop walks K tiles, writing S as it goes
TWO_KERNELS = {"reduce_first", "reduce_stream", "reduce_cluster"}  # a reduce kernel first, writing hi/lo
# how a tile of S leaves the registers: straight to global memory; staged in shared memory and
# written by one bulk copy (TMA on sm_90 where S's rows are 16-byte aligned); or (WALKS_K only)
# through two shared buffers whose TMA stores overlap the next tile's arithmetic; or
# (reduce_stream only) by two consumer warp groups that take every other tile, one staging and
# storing while the other computes, fed by a producer group (search_spaces/einsum_sum_specialized.py)
EPILOGUES = ("fragment", "shared", "async", "specialized")
# Whether the search offers the specialized walk: on since its first GPU run (H200, 2026-11-26):
# its three cases passed against float64 (tests/test_einsum_sum_specialized.py), and in
# experiments/einsum_sum_bench.py every one of its trials was correct and it was the fastest kernel
# for bfloat16 S at t=k=8192 (0.0688 ms against the async fused walk's 0.0888 ms, re-timed
# together; for float32 S 3% behind it). A switch, so the knob's ablation can leave it out.
SEARCH_SPECIALIZED = os.environ.get("TILESEARCH_SPECIALIZED", "1") == "1"
# Whether the search offers reduce_cluster: off. Correct against float64 on an H200 (2026-12-04,
# tests/test_einsum_sum_cluster.py), but in experiments/einsum_sum_bench.py at t=k=8192 its best was
# 13% behind the specialized walk for bfloat16 S (0.0782 against 0.0681 ms, re-timed together) and
# 12% behind the fused walk for float32 S (0.1128 against 0.1002 ms): a GEMM reloads hi/lo for every
# tile of S, where the walks keep a block's hi/lo in shared memory and stream only K's tiles.
# TILESEARCH_REDUCE_CLUSTER=1 offers it (with its two knobs, which are out of the space otherwise,
# so records and datasets keep their keys).
SEARCH_REDUCE_CLUSTER = os.environ.get("TILESEARCH_REDUCE_CLUSTER") == "1"
MAX_ACCUMULATORS_PER_THREAD = 128  # float32 registers; more spills on sm_90
D_ALIGN = 32  # d is padded (with zeros) to a multiple of this inside the kernels
# The reduce kernel of the two-kernel algorithms: query rows a block, its threads, and copies of Q
# in flight (at most h). At t=8192, h=16, d=128 on an H200 (scripts/reduce_probe.py, 2026-12-04)
# 64 rows, 256 threads and 6 stages took 15.9 us, against 20.5 us with the 32 rows, 128 threads
# and 3 stages before (a copy of Q: 20.3 us); fewer rows were slower at every depth (8 rows: 34-51 us).
REDUCE_ROWS = 64
REDUCE_THREADS = 256
REDUCE_STAGES = 6

# knobs each algorithm uses; every other knob is pinned to its first value
USES = {
    "direct": {"block_t", "block_k", "block_d", "num_stages", "threads", "epilogue"},
    "reduce_first": {"block_t", "block_k", "block_d", "num_stages", "threads", "epilogue"},
    "fused": {"block_t", "block_k", "num_stages", "threads", "k_split", "epilogue", "q_stages", "store_buffers"},
    "reduce_stream": {"block_t", "block_k", "num_stages", "threads", "k_split", "epilogue", "store_buffers"},
    "reduce_cluster": {"block_t", "block_k", "block_d", "num_stages", "threads", "cluster", "schedule"},
}

ACCUMULATION_FLOOR = 5e-6  # relative error allowed any float32-accumulated result
# unit roundoff of each dtype
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}


def padded_d(d: int) -> int:
    return -(-d // D_ALIGN) * D_ALIGN


def knobs() -> list[Any]:
    return [
        Categorical("algorithm", ALGORITHMS if SEARCH_REDUCE_CLUSTER else ALGORITHMS[:-1]),
        PowerOfTwo("block_t", 64, 256),
        PowerOfTwo("block_k", 64, 256),
        PowerOfTwo("block_d", 32, 128),
        IntRange("num_stages", 1, 4),
        Categorical("threads", (128, 256)),
        Categorical("k_split", (1, 2, 4, 8)),
        Categorical("epilogue", EPILOGUES if SEARCH_SPECIALIZED else EPILOGUES[:3]),
        # fused: copies of Q in flight while a block sums its rows over h (the kernel's prologue)
        IntRange("q_stages", 2, 4),
        # WALKS_K, async epilogue: shared S buffers, i.e. TMA stores in flight per block
        IntRange("store_buffers", 2, 4),
    ] + ([  # reduce_cluster: the pair of blocks' shared operand and the consumer groups' schedule
        Categorical("cluster", cluster.CLUSTERS),
        Categorical("schedule", cluster.SCHEDULES),
    ] if SEARCH_REDUCE_CLUSTER else [])


def s_element_bytes(out_dtype: str) -> int:
    """Bytes of one element of S: 4 in float32, 2 in the 16-bit input dtypes."""
    return 4 if out_dtype == "float32" else 2


def smem_bytes(config: Mapping[str, Any], d: int, out_dtype: str = "float32") -> int:
    """Shared memory of one block, as TileLang 0.1.15 plans it (buffers share space where their
    lifetimes do not overlap): the fused kernel's Q staging tiles, live only while it sums Q over
    h, share space with what its main loop uses (hi, lo, the K stages and the S tiles); the other
    kernels stage S after their loop, in the operands' space."""
    c = config
    if c["algorithm"] == "reduce_cluster":
        return cluster.smem_bytes(c, s_element_bytes(out_dtype))
    if c["epilogue"] == "specialized":  # nothing laid over anything else (shared-memory reuse off)
        dp = padded_d(d)
        return (2 * (2 * c["block_t"] * dp + c["num_stages"] * c["block_k"] * dp)
                + 2 * c["block_t"] * c["block_k"] * s_element_bytes(out_dtype))
    buffers = {"fragment": 0, "shared": 1, "async": c.get("store_buffers", 2)}[c["epilogue"]]
    staged = buffers * c["block_t"] * c["block_k"] * s_element_bytes(out_dtype)
    if c["algorithm"] in WALKS_K:
        dp = padded_d(d)
        summing = 2 * max(c.get("q_stages", 2), 2) * c["block_t"] * dp if c["algorithm"] == "fused" else 0
        looping = 2 * (2 * c["block_t"] * dp + c["num_stages"] * c["block_k"] * dp) + staged
        return max(summing, looping)
    return max(operand_smem_bytes(c, d), staged)


def operand_smem_bytes(config: Mapping[str, Any], d: int) -> int:
    """Shared memory of the operand tiles of one block of ``direct`` or ``reduce_first`` (2-byte
    elements)."""
    c = config
    if c["algorithm"] == "direct":
        q_tiles = c["num_stages"] * c["block_t"] * c["block_d"]
        k_once = c["block_d"] >= d  # one d step: K's tile is loaded once, not per stage
        return 2 * (q_tiles + (1 if k_once else c["num_stages"]) * c["block_k"] * c["block_d"])
    return 2 * c["num_stages"] * c["block_d"] * (2 * c["block_t"] + c["block_k"])


def pipelined_steps(problem: Problem, config: Mapping[str, Any]) -> int:
    """Iterations of the kernel's main pipelined loop."""
    c = config
    if c["algorithm"] in WALKS_K:
        k_tiles = -(-problem["k"] // c["block_k"])
        return -(-k_tiles // min(c["k_split"], k_tiles))
    if c["algorithm"] == "reduce_cluster":  # hi's d steps, then lo's
        return 2 * -(-padded_d(problem["d"]) // c["block_d"])
    d_steps = -(-problem["d"] // c["block_d"])
    return problem["h"] * d_steps if c["algorithm"] == "direct" else d_steps


def constraints(problem: Problem, target: Target) -> list[Any]:
    d = problem["d"]
    dp = padded_d(d)
    limit = target.smem_per_block
    first = {k.name: k.values()[0] for k in knobs()}

    def irrelevant(c: Mapping[str, Any]) -> str | None:
        used = USES[c["algorithm"]]
        for name, value in first.items():  # a record from before a knob existed has it at its default
            if name != "algorithm" and name not in used and c.get(name, value) != value:
                return f"irrelevant for algorithm {c['algorithm']}: {name} is pinned to {value}"
        return None

    def d_tile(c: Mapping[str, Any]) -> str | None:
        if c["algorithm"] not in WALKS_K and c["block_d"] > D_ALIGN and c["block_d"] // 2 >= dp:
            return f"block_d: {c['block_d']} is twice the padded d={dp} or more"
        return None

    def oversized(c: Mapping[str, Any]) -> str | None:
        for knob, extent in (("block_t", problem["t"]), ("block_k", problem["k"])):
            if c[knob] > 64 and c[knob] // 2 >= extent:
                return f"{knob}: {c[knob]} is twice {knob[-1]}={extent} or more"
        return None

    def k_tiles(c: Mapping[str, Any]) -> str | None:
        tiles = -(-problem["k"] // c["block_k"])
        if c["k_split"] > 1 and c["k_split"] > tiles:
            return f"k_split: {c['k_split']} > {tiles} tiles of k"
        return None

    def overlapped_stores(c: Mapping[str, Any]) -> str | None:
        if c["epilogue"] != "async":
            if c["store_buffers"] != first["store_buffers"]:
                return f"store_buffers: only the async epilogue has several; pinned to {first['store_buffers']}"
            return tma_stores(c) if c["epilogue"] == "specialized" else None
        if c["algorithm"] not in WALKS_K:
            return f"epilogue: async needs a loop that writes S (only {' and '.join(WALKS_K)} have one)"
        return tma_stores(c)

    def tma_stores(c: Mapping[str, Any]) -> str | None:
        row_bytes = problem["k"] * s_element_bytes(problem["out_dtype"])
        if row_bytes % 16:
            return f"epilogue: {c['epilogue']} stores by TMA, which needs S's rows ({row_bytes} B) 16-byte aligned"
        return None

    def stages(c: Mapping[str, Any]) -> str | None:
        if c["q_stages"] > max(problem["h"], 2):
            return f"q_stages: {c['q_stages']} > h={problem['h']} heads to pipeline"
        steps = pipelined_steps(problem, c)
        if c["num_stages"] > 1 and c["num_stages"] > steps:
            return f"num_stages: {c['num_stages']} > {steps} pipelined steps"
        return None

    def shared_memory(c: Mapping[str, Any]) -> str | None:
        used = smem_bytes(c, d, problem["out_dtype"])
        return f"shared memory: {used} B > {limit} B per block" if used > limit else None

    def specialized(c: Mapping[str, Any]) -> str | None:
        if c["epilogue"] != "specialized":
            return None
        if c["algorithm"] != "reduce_stream":
            return "epilogue: specialized is reduce_stream's walk (its hi/lo come from the workspace by TMA)"
        if c["threads"] != first["threads"]:
            return f"threads: the specialized walk launches its own three warp groups (pinned to {first['threads']})"
        if c["num_stages"] % 2:
            return "num_stages: the specialized walk's two consumer groups each keep to the stages of one parity (an even count)"
        if problem["d"] * 2 % 16:
            return f"epilogue: the specialized walk loads K by TMA, which needs its rows ({problem['d'] * 2} B) 16-byte aligned"
        return None

    def clustered(c: Mapping[str, Any]) -> str | None:
        return cluster.why_invalid(problem, c, dp) if c["algorithm"] == "reduce_cluster" else None

    def registers(c: Mapping[str, Any]) -> str | None:
        pingpong = c["algorithm"] == "reduce_cluster" and c["schedule"] == "pingpong"
        owners = 128 if c["epilogue"] == "specialized" or pingpong else c["threads"]  # threads holding a tile of S
        acc = c["block_t"] * c["block_k"] // owners
        if acc > MAX_ACCUMULATORS_PER_THREAD:
            return f"registers: {acc} float32 accumulators per thread > {MAX_ACCUMULATORS_PER_THREAD}"
        if c["algorithm"] == "fused" and c["block_t"] * dp // c["threads"] > MAX_ACCUMULATORS_PER_THREAD:
            return f"registers: {c['block_t'] * dp // c['threads']} float32 sums of Q per thread > {MAX_ACCUMULATORS_PER_THREAD}"
        return None

    return [irrelevant, oversized, d_tile, k_tiles, overlapped_stores, specialized, clustered, stages, shared_memory,
            registers]


class EinsumSumOp(Operator):
    """``einsum('thd,kd->thk', Q, K).sum(dim=1)`` by direct fusion or by reducing Q over h first."""

    name = "einsum_sum"
    description = "S = einsum('thd,kd->thk', Q, K).sum(1); fp16/bf16 in, fp32 accumulate, fp32 (or input dtype) out"
    params = (
        Param("t", int, minimum=1, help="queries: rows of Q and S"),
        Param("k", int, minimum=1, help="keys: rows of K, columns of S"),
        Param("h", int, minimum=1, help="heads: summed over"),
        Param("d", int, minimum=1, help="head dimension: contracted"),
        Param("dtype", str, default="bfloat16", choices=DTYPES),
        Param("out_dtype", str, default="float32", choices=OUT_DTYPES, help="float32, or the input dtype"),
    )
    # reduce_cluster's knobs: a configuration without them is a kernel of another algorithm, for
    # which they are pinned to these values
    defaults = {"cluster": cluster.CLUSTERS[0], "schedule": cluster.SCHEDULES[0]} if SEARCH_REDUCE_CLUSTER else {}
    examples = (
        dict(t=1024, k=1024, h=4, d=128),
        dict(t=130, k=67, h=5, d=40, dtype="float16", out_dtype="float16"),
        dict(t=1000, k=3001, h=3, d=71),
    )

    def problem(self, **raw: Any) -> Problem:
        problem = super().problem(**raw)
        if problem["out_dtype"] not in ("float32", problem["dtype"]):
            raise ProblemError(
                f"out_dtype={problem['out_dtype']} with dtype={problem['dtype']} would round to fewer bits "
                f"than the PyTorch expression's {problem['dtype']} output; use float32 or {problem['dtype']}"
            )
        return problem

    def space(self, problem: Problem, target: Target) -> Space:
        return Space(knobs(), constraints(problem, target))

    def program(self, problem: Problem, config: Config, target: Target) -> Any:
        """The tile program of ``config``; for ``reduce_first`` and ``reduce_stream``, the kernel
        that runs after :func:`reduce_program` (see :meth:`build`)."""
        p, c = problem, config
        shape = (p["t"], p["k"], p["h"], p["d"], p["dtype"], p["out_dtype"])
        if c["algorithm"] == "reduce_cluster":
            return cluster.gemm_program(*shape[:2], p["d"], p["dtype"], p["out_dtype"], padded_d(p["d"]), c,
                                        target.num_sms)
        if c.get("epilogue") == "specialized":
            return stream_specialized_program(*shape, block_t=c["block_t"], block_k=c["block_k"],
                                              num_stages=c["num_stages"], k_split=c["k_split"], dp=padded_d(p["d"]))
        template = {
            "direct": direct_program,
            "reduce_first": hilo_gemm_program,
            "fused": fused_program,
            "reduce_stream": stream_program,
        }
        return template[c["algorithm"]](*shape, **{name: c[name] for name in USES[c["algorithm"]]})

    def pass_configs(self, problem: Problem, config: Config) -> dict[str, Any]:
        """Turns TileLang's warp specialization off where 0.1.15 gets it wrong:

        - fused: it specializes the first pipelined loop and then multi-buffers the second
          loop's tiles twice over (double the shared memory); reduce_stream runs the same walk
          over K tiles, so it keeps the same (measured) lowering;
        - reduce_first when K's rows are not 16-byte aligned (d % 8 != 0): K is then copied by
          the producer threads rather than by TMA, and its tile is released after the hi
          product, while the lo product still reads it (a race: relative error 6.5e-4 at
          t=1000, k=3001, h=3, d=71 on an H100).

        Without it, both loops run as plain cp.async software pipelines.
        """
        if config["algorithm"] == "reduce_cluster":
            from search_spaces.gemm_cluster import pass_configs

            return pass_configs(config["cluster"], config["schedule"])
        if config.get("epilogue") == "specialized":  # its warp groups are written out
            return dict(SPECIALIZED_PASS_CONFIGS)
        unaligned_k = problem["d"] * 2 % 16 != 0
        if config["algorithm"] in WALKS_K or (config["algorithm"] == "reduce_first" and unaligned_k):
            return {"tl.disable_warp_specialized": True}
        return {}

    def build(self, problem: Problem, config: Config, target: Target) -> Any:
        """Compiles the kernel of ``config``; for the two-kernel algorithms, both, run in turn as a
        :class:`~tilesearch.composite.Composite` with their hi/lo workspace (the reduce kernel,
        the same for every configuration of a problem, is compiled once per process)."""
        import logging

        import tilelang  # noqa: F401  (configures its logger on import; quieted below)

        logging.getLogger("tilelang").setLevel(logging.WARNING)
        p = problem
        if config["algorithm"] not in TWO_KERNELS:
            return _compile(self.program(problem, config, target), target, self.pass_configs(problem, config))
        gemm = _compile(self.program(problem, config, target), target, self.pass_configs(problem, config))
        if config["algorithm"] == "reduce_cluster":
            return Composite(
                [Launch(_reduce_kernel(p["t"], p["h"], p["d"], p["dtype"], target, joined=True), ("Q", "HiLo")),
                 Launch(gemm, ("HiLo", "K", "S"))],
                inputs=("Q", "K"), outputs=("S",),
                workspaces=[Workspace("HiLo", (p["t"], 2 * padded_d(p["d"])), p["dtype"])],
            )
        reduce = _reduce_kernel(p["t"], p["h"], p["d"], p["dtype"], target)
        return reduce_then_gemm(reduce, gemm, rows=p["t"], cols=padded_d(p["d"]), dtype=p["dtype"])

    def make_inputs(self, problem: Problem, device: Any, generator: Any) -> tuple[Any, ...]:
        import torch

        dtype = getattr(torch, problem["dtype"])
        t, k, h, d = problem["t"], problem["k"], problem["h"], problem["d"]
        q = torch.randn((t, h, d), device=device, generator=generator, dtype=torch.float32).to(dtype)
        key = torch.randn((k, d), device=device, generator=generator, dtype=torch.float32).to(dtype)
        return q, key

    def make_outputs(self, problem: Problem, device: Any) -> tuple[Any, ...]:
        import torch

        return (torch.empty((problem["t"], problem["k"]), device=device, dtype=getattr(torch, problem["out_dtype"])),)

    def reference(self, problem: Problem, inputs: Sequence[Any]) -> tuple[Any, ...]:
        return (reference(*inputs),)

    def baseline(self, problem: Problem, inputs: Sequence[Any]) -> Any:
        q, key = inputs
        return lambda: pytorch_expression(q, key)

    def flops(self, problem: Problem) -> float:
        """The reduce-first count: ``t*h*d`` additions and a ``t x k x d`` product."""
        t, k, h, d = problem["t"], problem["k"], problem["h"], problem["d"]
        return float(t * h * d + 2 * t * k * d)

    def bytes(self, problem: Problem) -> float:
        t, k, h, d = problem["t"], problem["k"], problem["h"], problem["d"]
        out = s_element_bytes(problem["out_dtype"])
        return float(2 * (t * h * d + k * d) + out * t * k)

    def features(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
        """Traffic, waves, the walk against its prologue, stores in flight
        (:mod:`search_spaces.einsum_sum_model`, which imports this module's helpers)."""
        from search_spaces import einsum_sum_model

        return einsum_sum_model.features(problem, config, target)

    def tolerance(self, problem: Problem, config: Config) -> Tolerance:
        """Each algorithm's own error, plus the rounding of S when ``out_dtype`` is 16-bit.

        - Accumulation: a tensor-core step adds 16 products to the float32 accumulator and may
          truncate by one float32 ulp (2^-23), so the error grows with the steps of the
          reduction: h * padded d / 16 (direct) or 2 * padded d / 16 (hi and lo).
        - The hi/lo split leaves less than 2^-16 (bfloat16) or 2^-22 (float16) of each sum;
          emulated on CPU it costs 1e-6 to 2e-6 relative Frobenius error with bfloat16
          (tests/test_einsum_sum.py), counted here with 10x room as 2e-5.
        - A 16-bit output adds up to its unit roundoff (about 0.42 of it, relative Frobenius).

        The max error (relative to max|S|) is allowed 4x the Frobenius one, as on CPU it ran to
        3.2x. For bfloat16 in and float32 out at h=16, d=128 this gives 2.0e-5 (direct) and
        2.7e-5 (hi/lo), about 100x below the PyTorch expression's own error (about 2.3e-3). The
        first H100 run measured 2.1e-6 (direct) and 9.5e-7 (hi/lo) there.
        """
        dp = padded_d(problem["d"])
        hilo = config["algorithm"] != "direct"
        steps = -(-(2 * dp if hilo else problem["h"] * dp) // 16)
        split = (2e-5 if problem["dtype"] == "bfloat16" else 1e-6) if hilo else 0.0
        rel_fro = ACCUMULATION_FLOOR + steps * 2.0**-23 + split
        max_rel = 4 * rel_fro
        if problem["out_dtype"] != "float32":
            u = UNIT_ROUNDOFF[problem["out_dtype"]]
            rel_fro, max_rel = rel_fro + u, max_rel + u
        return Tolerance(rel_fro=rel_fro, max_rel=max_rel)


def _compile(program: Any, target: Target, pass_configs: dict[str, Any]) -> Any:
    import tilelang

    return tilelang.compile(program, target=target.tvm(), pass_configs=pass_configs or None)


@functools.cache
def _reduce_kernel(t: int, h: int, d: int, dtype: str, target: Target, joined: bool = False) -> Any:
    return _compile(reduce_program(t, h, d, dtype, joined=joined), target, {})  # joined: reduce_cluster's


def reference(q: Any, key: Any) -> Any:
    """S in float64 (summing over h first is exact enough in float64)."""
    import torch

    return q.to(torch.float64).sum(dim=1) @ key.to(torch.float64).T


def pytorch_expression(q: Any, key: Any) -> Any:
    """The expression this operator replaces, as users write it."""
    import torch

    return torch.einsum("thd,kd->thk", q, key).sum(dim=1)


def split_hilo(x: Any, dtype: Any) -> tuple[Any, Any]:
    """``hi = dtype(x)``, ``lo = dtype(x - hi)``: the split the kernels do, in torch (for tests)."""
    import torch

    hi = x.to(dtype)
    lo = (x - hi.to(torch.float32)).to(dtype)
    return hi, lo


def reduce_then_gemm(reduce: Any, gemm: Any, *, rows: int, cols: int, dtype: str) -> Composite:
    """``reduce_first`` or ``reduce_stream`` as one program ``(Q, K, S)``: the reduce kernel writes
    the hi and lo parts of Q summed over h, the second kernel reads them with K."""
    return Composite(
        [Launch(reduce, ("Q", "Hi", "Lo")), Launch(gemm, ("Hi", "Lo", "K", "S"))],
        inputs=("Q", "K"),
        outputs=("S",),
        workspaces=[Workspace("Hi", (rows, cols), dtype), Workspace("Lo", (rows, cols), dtype)],
    )


@functools.cache
def macros() -> Any:
    """TileLang macros shared by the templates (built on first use: importing this module does not
    import TileLang)."""
    import tilelang.language as T

    @T.macro
    def sum_heads_split(Q, row0, rows: int, dp: int, stages: int, q_tile, total, hi, lo):
        """``hi + lo = sum_h Q[row0 : row0 + rows, h, :]`` summed in float32; zeros past t and d."""
        T.clear(total)
        for head in T.Pipelined(Q.shape[1], num_stages=stages):
            T.copy(Q[row0 : row0 + rows, head, 0:dp], q_tile)
            for i, j in T.Parallel(rows, dp):
                total[i, j] += q_tile[i, j]
        for i, j in T.Parallel(rows, dp):
            hi[i, j] = total[i, j]
        for i, j in T.Parallel(rows, dp):
            lo[i, j] = total[i, j] - T.Cast("float32", hi[i, j])

    @T.macro
    def store_tile(acc, s_tile, S, row, col):
        """Writes ``acc`` to ``S[row:, col:]``, through the shared tile ``s_tile`` unless it is None."""
        if s_tile is None:
            T.copy(acc, S[row, col])
        else:
            T.copy(acc, s_tile)
            T.copy(s_tile, S[row, col])

    return SimpleNamespace(sum_heads_split=sum_heads_split, store_tile=store_tile)


def direct_program(
    t: int,
    k: int,
    h: int,
    d: int,
    dtype: str = "bfloat16",
    out_dtype: str = "float32",
    *,
    block_t: int = 128,
    block_k: int = 128,
    block_d: int = 64,
    num_stages: int = 3,
    threads: int = 256,
    epilogue: str = "fragment",
) -> Any:
    """``direct``: a ``block_t x block_k`` tile of S accumulates ``Q[:, h, :] @ K^T`` over every h."""
    import tilelang.language as T

    d_steps = -(-d // block_d)
    k_once = d_steps == 1  # K's tile is the same for every h: load it once
    staged = epilogue == "shared"

    @T.prim_func
    def einsum_sum_direct(
        Q: T.Tensor((t, h, d), dtype),
        K: T.Tensor((k, d), dtype),
        S: T.Tensor((t, k), out_dtype),
    ):
        with T.Kernel(T.ceildiv(k, block_k), T.ceildiv(t, block_t), threads=threads) as (bx, by):
            q_tile = T.alloc_shared((block_t, block_d), dtype)
            k_tile = T.alloc_shared((block_k, block_d), dtype)
            acc = T.alloc_fragment((block_t, block_k), "float32")
            s_tile = T.alloc_shared((block_t, block_k), out_dtype) if staged else None
            T.clear(acc)
            if k_once:
                T.copy(K[bx * block_k : (bx + 1) * block_k, 0:block_d], k_tile)
            for step in T.Pipelined(h * d_steps, num_stages=num_stages):
                head = step // d_steps
                d0 = (step % d_steps) * block_d
                T.copy(Q[by * block_t : (by + 1) * block_t, head, d0 : d0 + block_d], q_tile)
                if not k_once:
                    T.copy(K[bx * block_k : (bx + 1) * block_k, d0 : d0 + block_d], k_tile)
                T.gemm(q_tile, k_tile, acc, transpose_B=True)
            macros().store_tile(acc, s_tile, S, by * block_t, bx * block_k)

    return einsum_sum_direct


def reduce_program(t: int, h: int, d: int, dtype: str = "bfloat16", rows: int = REDUCE_ROWS,
                   threads: int = REDUCE_THREADS, stages: int = REDUCE_STAGES, joined: bool = False) -> Any:
    """First kernel of ``reduce_first``: ``x = sum_h Q`` in float32, written as ``hi``/``lo``
    ``[t, padded d]`` in ``dtype`` (the padding columns are zeros); ``rows`` of Q a block.
    ``joined`` (reduce_cluster): hi and lo side by side in one ``[t, 2 x padded d]`` workspace,
    so that a GEMM reads them as one operand."""
    import tilelang.language as T

    dp = padded_d(d)

    @T.macro
    def reduce(Q, bx, hi, lo):
        q_tile = T.alloc_shared((rows, dp), dtype)
        total = T.alloc_fragment((rows, dp), "float32")
        macros().sum_heads_split(Q, bx * rows, rows, dp, max(1, min(stages, h)), q_tile, total, hi, lo)

    if joined:

        @T.prim_func
        def einsum_sum_reduce_joined(
            Q: T.Tensor((t, h, d), dtype),
            HiLo: T.Tensor((t, 2 * dp), dtype),
        ):
            with T.Kernel(T.ceildiv(t, rows), threads=threads) as bx:
                hi = T.alloc_fragment((rows, dp), dtype)
                lo = T.alloc_fragment((rows, dp), dtype)
                reduce(Q, bx, hi, lo)
                T.copy(hi, HiLo[bx * rows, 0])
                T.copy(lo, HiLo[bx * rows, dp])

        return einsum_sum_reduce_joined

    @T.prim_func
    def einsum_sum_reduce(
        Q: T.Tensor((t, h, d), dtype),
        Hi: T.Tensor((t, dp), dtype),
        Lo: T.Tensor((t, dp), dtype),
    ):
        with T.Kernel(T.ceildiv(t, rows), threads=threads) as bx:
            hi = T.alloc_fragment((rows, dp), dtype)
            lo = T.alloc_fragment((rows, dp), dtype)
            reduce(Q, bx, hi, lo)
            T.copy(hi, Hi[bx * rows, 0])
            T.copy(lo, Lo[bx * rows, 0])

    return einsum_sum_reduce


def hilo_gemm_program(
    t: int,
    k: int,
    h: int,
    d: int,
    dtype: str = "bfloat16",
    out_dtype: str = "float32",
    *,
    block_t: int = 128,
    block_k: int = 128,
    block_d: int = 64,
    num_stages: int = 3,
    threads: int = 256,
    epilogue: str = "fragment",
) -> Any:
    """Second kernel of ``reduce_first``: ``S = hi @ K^T + lo @ K^T`` with float32 accumulation."""
    import tilelang.language as T

    dp = padded_d(d)
    staged = epilogue == "shared"

    @T.prim_func
    def einsum_sum_hilo_gemm(
        Hi: T.Tensor((t, dp), dtype),
        Lo: T.Tensor((t, dp), dtype),
        K: T.Tensor((k, d), dtype),
        S: T.Tensor((t, k), out_dtype),
    ):
        with T.Kernel(T.ceildiv(k, block_k), T.ceildiv(t, block_t), threads=threads) as (bx, by):
            hi_tile = T.alloc_shared((block_t, block_d), dtype)
            lo_tile = T.alloc_shared((block_t, block_d), dtype)
            k_tile = T.alloc_shared((block_k, block_d), dtype)
            acc = T.alloc_fragment((block_t, block_k), "float32")
            s_tile = T.alloc_shared((block_t, block_k), out_dtype) if staged else None
            T.clear(acc)
            for step in T.Pipelined(T.ceildiv(d, block_d), num_stages=num_stages):
                T.copy(Hi[by * block_t, step * block_d], hi_tile)
                T.copy(Lo[by * block_t, step * block_d], lo_tile)
                T.copy(K[bx * block_k, step * block_d], k_tile)
                T.gemm(hi_tile, k_tile, acc, transpose_B=True)
                T.gemm(lo_tile, k_tile, acc, transpose_B=True)
            macros().store_tile(acc, s_tile, S, by * block_t, bx * block_k)

    return einsum_sum_hilo_gemm


def fused_program(
    t: int,
    k: int,
    h: int,
    d: int,
    dtype: str = "bfloat16",
    out_dtype: str = "float32",
    *,
    block_t: int = 64,
    block_k: int = 128,
    num_stages: int = 2,
    threads: int = 128,
    k_split: int = 1,
    epilogue: str = "fragment",
    q_stages: int = 2,
    store_buffers: int = 2,
) -> Any:
    """``fused``: a block sums its query rows over h into shared hi/lo tiles (``q_stages`` copies
    of Q in flight), then walks ``ceil(k_tiles / k_split)`` consecutive K tiles, writing a tile of
    S per step. With ``epilogue="async"`` the tiles of S rotate through ``store_buffers`` shared
    buffers and leave by TMA stores that are waited for only when their buffer comes round again,
    so writing tiles overlaps computing the next ones."""
    import tilelang.language as T

    dp = padded_d(d)
    walk = _KWalk(k, dp, dtype, out_dtype, block_t, block_k, num_stages, k_split, epilogue, store_buffers)

    @T.prim_func
    def einsum_sum_fused(
        Q: T.Tensor((t, h, d), dtype),
        K: T.Tensor((k, d), dtype),
        S: T.Tensor((t, k), out_dtype),
    ):
        with T.Kernel(walk.splits, T.ceildiv(t, block_t), threads=threads) as (bx, by):
            q_tile = T.alloc_shared((block_t, dp), dtype)
            hi = T.alloc_shared((block_t, dp), dtype)
            lo = T.alloc_shared((block_t, dp), dtype)
            total = T.alloc_fragment((block_t, dp), "float32")
            macros().sum_heads_split(Q, by * block_t, block_t, dp, q_stages, q_tile, total, hi, lo)
            walk.macro(K, S, hi, lo, bx, by)

    return einsum_sum_fused


def stream_program(
    t: int,
    k: int,
    h: int,
    d: int,
    dtype: str = "bfloat16",
    out_dtype: str = "float32",
    *,
    block_t: int = 64,
    block_k: int = 128,
    num_stages: int = 2,
    threads: int = 128,
    k_split: int = 1,
    epilogue: str = "fragment",
    store_buffers: int = 2,
) -> Any:
    """Second kernel of ``reduce_stream``: the fused kernel's walk over K tiles, with hi/lo loaded
    from the workspace the reduce kernel wrote (a short prologue, instead of summing Q over h in
    every block)."""
    import tilelang.language as T

    dp = padded_d(d)
    walk = _KWalk(k, dp, dtype, out_dtype, block_t, block_k, num_stages, k_split, epilogue, store_buffers)

    @T.prim_func
    def einsum_sum_stream(
        Hi: T.Tensor((t, dp), dtype),
        Lo: T.Tensor((t, dp), dtype),
        K: T.Tensor((k, d), dtype),
        S: T.Tensor((t, k), out_dtype),
    ):
        with T.Kernel(walk.splits, T.ceildiv(t, block_t), threads=threads) as (bx, by):
            hi = T.alloc_shared((block_t, dp), dtype)
            lo = T.alloc_shared((block_t, dp), dtype)
            T.copy(Hi[by * block_t, 0], hi)
            T.copy(Lo[by * block_t, 0], lo)
            walk.macro(K, S, hi, lo, bx, by)

    return einsum_sum_stream


class _KWalk:
    """The loop the fused and stream kernels share: ``S[rows, cols] = hi @ K[cols]^T + lo @ K[cols]^T``
    for the ``ceil(k_tiles / k_split)`` consecutive K tiles of split ``bx``, a tile of S per step."""

    def __init__(self, k, dp, dtype, out_dtype, block_t, block_k, num_stages, k_split, epilogue, store_buffers):
        import tilelang.language as T

        k_tiles = -(-k // block_k)
        per_block = -(-k_tiles // k_split)
        self.splits = -(-k_tiles // per_block)
        staged, overlapped = epilogue == "shared", epilogue == "async"

        @T.macro
        def walk(K, S, hi, lo, bx, by):
            k_tile = T.alloc_shared((block_k, dp), dtype)
            acc = T.alloc_fragment((block_t, block_k), "float32")
            s_tile = T.alloc_shared((block_t, block_k), out_dtype) if staged else None
            s_tiles = T.alloc_shared((store_buffers, block_t, block_k), out_dtype) if overlapped else None
            for step in T.Pipelined(per_block, num_stages=num_stages):
                col = (bx * per_block + step) * block_k
                T.copy(K[col : col + block_k, 0:dp], k_tile)
                T.clear(acc)
                T.gemm(hi, k_tile, acc, transpose_B=True)
                T.gemm(lo, k_tile, acc, transpose_B=True)
                if overlapped:
                    T.tma_store_wait(store_buffers - 1)  # the store that last used this buffer has read it
                    T.copy(acc, s_tiles[step % store_buffers, :, :])
                    T.tma_copy(
                        s_tiles[step % store_buffers, :, :],
                        S[by * block_t : (by + 1) * block_t, col : col + block_k],
                        eviction_policy="evict_first",
                    )
                else:
                    macros().store_tile(acc, s_tile, S, by * block_t, col)
            if overlapped:
                T.tma_store_wait(0)

        self.macro = walk
