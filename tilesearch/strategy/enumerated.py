"""Strategies that walk the valid configurations in a fixed order: ``grid`` in knob order,
``random`` in an order fixed by its seed (:meth:`~tilesearch.space.Space.shuffled`). Both skip what
is measured or in flight, so a resumed run picks up where it stopped."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from tilesearch.strategy.base import Proposal, SearchContext, Strategy


def candidate_key(context: SearchContext, config: dict) -> str:
    return context.candidate(config).key


class GridStrategy(Strategy):
    """Every valid configuration in enumeration order (the last knob varies fastest)."""

    name = "grid"
    polished = False
    learns = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._order: _Kept | None = None

    def order(self, context: SearchContext) -> Iterable[dict]:
        """The configurations to propose, in order; read only as far as the proposals go."""
        return context.space.listing()

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self._order is None:
            self._order = _Kept(self.order(context))
        taken = context.taken()
        out = []
        for config in self._order:
            if len(out) == n:
                break
            if candidate_key(context, config) not in taken:
                out.append(Proposal(config))
        return out


class RandomStrategy(GridStrategy):
    """Valid configurations in a random order fixed by ``seed`` (sampling without replacement)."""

    name = "random"
    polished = True  # a search, in a random order

    def order(self, context: SearchContext) -> Iterable[dict]:
        return context.space.shuffled(random.Random(self.seed))


class _Kept:
    """An order read as far as the proposals need and kept, so that each round of proposals reads
    it from the start (skipping what is taken) while a random order is still being drawn."""

    def __init__(self, order: Iterable[dict]) -> None:
        self._rest, self._kept = iter(order), []

    def __iter__(self) -> Iterator[dict]:
        i = 0
        while True:
            if i == len(self._kept):
                config = next(self._rest, None)
                if config is None:
                    return
                self._kept.append(config)
            yield self._kept[i]
            i += 1
