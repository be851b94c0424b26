"""Seeding a search with analytic recommendations: the first proposals of any strategy can be
configurations that a model of the hardware recommends, before the strategy chooses.

``carver``: TileLang's Carver (``tilelang.carver``, ROLLER-style tile analysis) recommends
block shapes and a reduction step for a matmul on the target; each hint becomes the valid
configuration of the space with that ``block_m x block_n`` (and the largest ``block_k`` not
above the hint's reduction step) whose other knobs are closest to common defaults. Carver needs
no GPU here: the device it models is described from the :class:`~tilesearch.target.Target`.
Optuna-sampled strategies learn from the hints like from their own trials: the tuner opens
every fixed proposal as a trial with those parameters (see ``TuningDatabase.ask``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optuna

from tilesearch.op import Problem
from tilesearch.space import Config, Space
from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import candidate_key
from tilesearch.target import Target

GEMM_DEFAULTS = {"num_stages": 3, "panel_size": 8, "warp_policy": "square"}


class HintError(ValueError):
    """No hints of that kind for this op."""


def _carver_device(target: Target) -> Any:
    import tilelang  # noqa: F401  (before tvm)
    import tvm
    from tilelang.carver.arch import CUDA

    class ModelledCUDA(CUDA):
        """Carver's CUDA device, described from a Target instead of a live GPU."""

        def __init__(self) -> None:  # no super().__init__: it opens the GPU
            self.target = tvm.target.Target({"kind": "cuda", "arch": target.arch})
            self.sm_version = int("".join(ch for ch in target.arch if ch.isdigit()))
            self.name = target.gpu
            self.device = None
            self.platform = "CUDA"
            self.smem_cap = target.smem_per_block
            self.compute_max_core = target.num_sms
            self.warp_size = 32
            self.compute_capability = str(self.sm_version)
            self.reg_cap = 65536
            self.max_smem_usage = 2 * target.smem_per_block
            self.sm_partition = 4
            self.l2_cache_size_bytes = target.l2_bytes
            self.transaction_size = [32, 128]
            self.bandwidth = [750, 12080]
            self.available_tensor_instructions = None

    return ModelledCUDA()


def carver_gemm(problem: Problem, space: Space, target: Target, n: int = 8) -> list[Config]:
    """Up to ``n`` distinct valid configurations from Carver's matmul hints, best first."""
    from tilelang import carver

    if problem.op != "gemm":
        raise HintError(f"carver hints are implemented for gemm, not {problem.op}")
    template = carver.MatmulTemplate(
        M=problem["m"], N=problem["n"], K=problem["k"], in_dtype=problem["dtype"], accum_dtype="float32",
        out_dtype=problem["dtype"], trans_B=problem.get("layout") == "nt",
    ).with_arch(_carver_device(target))
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
    wanted = {**GEMM_DEFAULTS, "threads": 256 if tile >= 128 * 128 else 128}
    return tuple(config.get(k) != v for k, v in wanted.items())


HINTS: dict[str, Callable[[Problem, Space, Target, int], list[Config]]] = {"carver": carver_gemm}


class Hinted(Strategy):
    """Proposes the hinted configurations first (those not measured yet), then what ``inner``
    proposes. The hints are computed on the first call.

    Args:
        inner: the strategy that takes over.
        kind: a key of :data:`HINTS`.
        n: how many hints to try.
    """

    def __init__(self, inner: Strategy, kind: str = "carver", n: int = 8) -> None:
        if kind not in HINTS:
            raise HintError(f"unknown hints {kind!r}; choose one of {', '.join(HINTS)}")
        self.inner, self.kind, self.n = inner, kind, n
        self.name = inner.name
        self.hints: list[Config] | None = None

    def sampler(self) -> optuna.samplers.BaseSampler | None:
        return self.inner.sampler()

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self.hints is None:
            self.hints = HINTS[self.kind](context.problem, context.space, context.target, self.n)
        taken = context.taken()
        first = [Proposal(c) for c in self.hints if candidate_key(context, c) not in taken][:n]
        return first + (self.inner.propose(context, n - len(first)) if len(first) < n else [])

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "hints": self.kind}
