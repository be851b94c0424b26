"""The strategy interface: propose configurations to measure next.

Call order: the tuner creates the database with :meth:`Strategy.sampler` (the Optuna sampler that
``study.ask`` uses), then calls :meth:`Strategy.propose` whenever the pipeline has room, with a
:class:`SearchContext` that shows everything measured so far and what is in flight. A strategy
either fixes configurations itself (grid, random, cost-model guided) or lets its Optuna sampler
choose through ``context.ask()``. It may return fewer proposals than asked for; none means the
strategy has nothing left to try.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from tilesearch.database import TrialRecord, TuningDatabase
from tilesearch.op import Operator, Problem
from tilesearch.records import Candidate
from tilesearch.space import Config, Space
from tilesearch.target import Target


@dataclass
class Proposal:
    """A configuration to try; ``trial`` is set when an Optuna sampler already opened its trial."""

    config: Config
    trial: optuna.Trial | None = None


@dataclass
class SearchContext:
    """What a strategy may look at: the space, the problem, and the database. ``runtime``: the
    problem parameters the study's kernels take at run time (``TuneSettings.runtime``)."""

    op: Operator
    problem: Problem
    space: Space
    target: Target
    db: TuningDatabase
    seed: int = 0
    runtime: tuple[str, ...] = ()

    def candidate(self, config: dict) -> Candidate:
        """``config`` of this study's problem, ready to build and run; its ``key`` is the one
        the study records, so what a strategy checks against :meth:`taken` is."""
        return Candidate(self.problem.op, self.problem.to_dict(), config, self.target, runtime=self.runtime)

    def finished(self) -> dict[str, TrialRecord]:
        return self.db.finished()

    def taken(self) -> set[str]:
        """Keys measured, pruned or in flight: a strategy need not propose them again."""
        return set(self.db.finished()) | set(self.db.in_flight())

    def ask(self) -> Proposal:
        """Lets the study's sampler pick a configuration (the trial is opened in the database)."""
        trial = self.db.ask(self.space.distributions())
        return Proposal(self.space.from_params(trial.params), trial)


class Strategy(abc.ABC):
    """Base class of search strategies (plain objects; see :func:`tilesearch.strategy.create`)."""

    name: str = "strategy"
    polished: bool = True
    """Whether ``tune``'s polish may take the end of the budget (``TuneSettings.polish``): not
    for an enumeration (a grid, a listed set), whose budget is its list."""
    learns: bool = True
    """Whether its proposals depend on the results so far: ``tune`` keeps only about a round more
    than the compile pool's workers in flight for one that does (proposals made far ahead are
    made blind), and enough to fill the pool's batches for one that does not (a grid, a random
    order), whose compiles then share compiler runs (:mod:`tilesearch.builder.batch`)."""
    blind: int = 0
    """Results the strategy has seen before its proposals depend on them (an Optuna sampler's
    random start-up trials): every proposal that ``tune``'s pipeline would make before then is
    a draw that no result steers, so ``tune`` launches them all at once (``_Loop``'s start)."""

    def sampler(self) -> optuna.samplers.BaseSampler | None:
        """The Optuna sampler the study is opened with; ``None`` keeps Optuna's default."""
        return optuna.samplers.RandomSampler(seed=0)

    @abc.abstractmethod
    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        """Up to ``n`` configurations to try next; an empty list ends the search."""

    def rank(self, context: SearchContext, configs: Sequence[Config]) -> list[float] | None:
        """How promising each of ``configs`` is by what the strategy has learnt, higher first
        (the polish's order); ``None``: it has no model, and the op's estimate decides."""
        return None

    def describe(self) -> Mapping[str, Any]:
        return {"name": self.name}
