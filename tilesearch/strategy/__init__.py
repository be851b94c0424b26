"""Search strategies. :func:`create` takes a short name or a :class:`Strategy` instance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import GridStrategy, RandomStrategy
from tilesearch.strategy.sampler import SamplerStrategy, tpe
from tilesearch.strategy.xgb import XGBStrategy

STRATEGIES: dict[str, Callable[..., Strategy]] = {
    "grid": GridStrategy,
    "random": RandomStrategy,
    "tpe": tpe,
    "xgb": XGBStrategy,
}


class UnknownStrategyError(LookupError):
    pass


def create(strategy: str | Strategy, seed: int = 0, **options: Any) -> Strategy:
    """A strategy from its name (``grid``, ``random``, ``tpe``, ``xgb``, ...) or the instance
    itself; ``options`` go to the strategy (``transfer=`` for ``xgb``)."""
    if isinstance(strategy, Strategy):
        return strategy
    if strategy not in STRATEGIES:
        raise UnknownStrategyError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    try:
        return STRATEGIES[strategy](seed, **options)
    except TypeError:
        if not options:
            raise
        raise UnknownStrategyError(f"strategy {strategy!r} takes no option {', '.join(options)}") from None


__all__ = [
    "STRATEGIES",
    "GridStrategy",
    "Proposal",
    "RandomStrategy",
    "SamplerStrategy",
    "SearchContext",
    "Strategy",
    "UnknownStrategyError",
    "XGBStrategy",
    "create",
]
