"""Strategies that walk the list of valid configurations: ``grid`` in knob order, ``random`` in a
seeded shuffle. Both skip what is measured or in flight, so a resumed run picks up where it
stopped."""

from __future__ import annotations

import random
from collections.abc import Sequence

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
        self._order: Sequence[dict] | None = None

    def order(self, context: SearchContext) -> Sequence[dict]:
        return context.space.listing()

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self._order is None:
            self._order = self.order(context)
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

    def order(self, context: SearchContext) -> Sequence[dict]:
        # the listing's positions shuffled, not a list of its dicts: the same order, and only the
        # few configurations a search reads are made
        return context.space.listing().shuffled(random.Random(self.seed))
