"""Seeding a search with analytic recommendations: the first proposals of any strategy can be
configurations that a model of the hardware recommends, before the strategy chooses.

The operator computes them (:meth:`~tilesearch.op.Operator.hints`, with the kinds it lists in
``hint_kinds``): GEMM offers ``carver``, TileLang's Carver (``tilelang.carver``, ROLLER-style tile
analysis) recommending block shapes and a reduction step for a matmul on the target. Carver
needs no GPU here: :func:`carver_device` describes the device it models from the
:class:`~tilesearch.target.Target`. Optuna-sampled strategies receive the hints as
trials: the tuner opens every fixed proposal as a trial with those parameters (see
``TuningDatabase.ask``), so TPE and GP learn from them like from their own trials.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optuna

from tilesearch.op import HintError
from tilesearch.space import Config
from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import candidate_key
from tilesearch.target import Target

__all__ = ["HintError", "Hinted", "carver_device"]


def carver_device(target: Target) -> Any:
    """Carver's model of a CUDA device (``tilelang.carver.arch.CUDA``) built from ``target``
    instead of from a live GPU, for operators whose hints come from Carver."""
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


class Hinted(Strategy):
    """Proposes the hinted configurations first (those not measured yet), then what ``inner``
    proposes. The hints are the operator's, computed on the first call (which raises
    :class:`HintError` if the operator offers no hints of that kind).

    Args:
        inner: the strategy that takes over; ``None``: the search ends after the hints.
        kind: one of the operator's ``hint_kinds``, or the configurations themselves (those
            invalid in the space are left out), e.g. the winners of neighbouring sizes of a range.
        n: how many hints to try.
    """

    def __init__(self, inner: Strategy | None, kind: str | Sequence[Config] = "carver", n: int = 8) -> None:
        self.inner, self.kind, self.n = inner, kind, n
        self.name = inner.name if inner is not None else "hints"
        self.polished = inner.polished if inner is not None else False
        self.learns = inner.learns if inner is not None else False
        self.blind = inner.blind if inner is not None else 0  # hinted results count towards it too
        self.hints: list[Config] | None = None

    def sampler(self) -> optuna.samplers.BaseSampler | None:
        return self.inner.sampler() if self.inner is not None else optuna.samplers.RandomSampler(seed=0)

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self.hints is None:
            if isinstance(self.kind, str):
                self.hints = context.op.hints(context.problem, context.space, context.target, kind=self.kind, n=self.n)
            else:
                self.hints = [dict(c) for c in self.kind if context.space.why_invalid(c) is None]
        taken = context.taken()
        first = [Proposal(c) for c in self.hints if candidate_key(context, c) not in taken][:n]
        if len(first) >= n or self.inner is None:
            return first
        return first + self.inner.propose(context, n - len(first))

    def rank(self, context: SearchContext, configs: Sequence[Config]) -> list[float] | None:
        return self.inner.rank(context, configs) if self.inner is not None else None

    def describe(self) -> dict[str, Any]:
        inner = self.inner.describe() if self.inner is not None else {"name": self.name}
        return {**inner, "hints": self.kind if isinstance(self.kind, str) else "listed"}
