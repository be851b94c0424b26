"""Search strategies. :func:`create` takes a short name or a :class:`Strategy` instance."""

from __future__ import annotations

from collections.abc import Callable

from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import GridStrategy, RandomStrategy
from tilesearch.strategy.sampler import SamplerStrategy, tpe

STRATEGIES: dict[str, Callable[[int], Strategy]] = {
    "grid": GridStrategy,
    "random": RandomStrategy,
    "tpe": tpe,
}


class UnknownStrategyError(LookupError):
    pass


def create(strategy: str | Strategy, seed: int = 0) -> Strategy:
    """A strategy from its name (``grid``, ``random``, ``tpe``, ...) or the instance itself."""
    if isinstance(strategy, Strategy):
        return strategy
    if strategy not in STRATEGIES:
        raise UnknownStrategyError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[strategy](seed)


__all__ = [
    "STRATEGIES",
    "GridStrategy",
    "Proposal",
    "RandomStrategy",
    "SamplerStrategy",
    "SearchContext",
    "Strategy",
    "UnknownStrategyError",
    "create",
]
