"""A wrapper that ends a search early: after a deadline, or once a goal is reached."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna

from tilesearch.space import Config
from tilesearch.strategy.base import Proposal, SearchContext, Strategy


class Until(Strategy):
    """Proposes what ``inner`` proposes until ``stop(context)`` is true, then nothing (which ends
    the tuning loop once the trials in flight are done).

    Args:
        inner: the strategy that chooses.
        stop: called before each proposal round; true ends the search.
    """

    def __init__(self, inner: Strategy, stop: Callable[[SearchContext], bool]) -> None:
        self.inner = inner
        self.stop = stop
        self.name = inner.name
        self.polished = inner.polished
        self.learns = inner.learns
        self.blind = inner.blind
        self.stopped = False

    def sampler(self) -> optuna.samplers.BaseSampler | None:
        return self.inner.sampler()

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self.stopped or self.stop(context):
            self.stopped = True
            return []
        return self.inner.propose(context, n)

    def rank(self, context: SearchContext, configs: Sequence[Config]) -> list[float] | None:
        return self.inner.rank(context, configs)

    def describe(self) -> Mapping[str, Any]:
        return self.inner.describe()
