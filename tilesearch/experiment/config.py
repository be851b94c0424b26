"""What an experiment declares: problems, strategies, trials, seeds, peers, and where it writes.

An experiment script is this one record and a call to :func:`tilesearch.experiment.run`; what
every study does (tune, re-time the top beside the baseline and the peers, write the table, JSON
and PNG) lives once, in the runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilesearch.runner import Runner
from tilesearch.runner.peer import Peer

EVERY = 10**6
"""Trials that stand for "every configuration": a search ends when its space is exhausted."""


class ExperimentError(ValueError):
    """An experiment that cannot run as declared (an unknown peer, a bad override)."""


RunnerSpec = str | Callable[[dict[str, Any]], "str | Runner"]


@dataclass(frozen=True)
class Experiment:
    """One study.

    Attributes:
        name: names the output files (``<out>/<name>.json``, ``.txt``, ``.png``, ``.log``)
            and the studies in its storage.
        op: the operator (registered name).
        problems: problem parameters, one dict per problem.
        strategies: strategy names; each problem is tuned with each, with each seed.
        trials: trials per search, or per strategy (``{"grid": 32, "xgb": 8}``).
        seeds: seeds per strategy.
        repeats: separate searches of each strategy and seed (their own studies), to see how
            far a whole run reproduces.
        isolate: run each search as a user's ``tune`` would run: in a fresh Python process,
            on a storage of its own cleared first (so ``xgb`` learns nothing from the other
            searches' studies); a killed experiment then restarts its searches instead of
            resuming them.
        peers: names in :data:`tilesearch.experiment.peers.PEERS` or :class:`Peer` records,
            timed beside the top configurations in the final re-time.
        top: configurations of each search re-timed together at the end.
        top_by: a knob: re-time the best configuration of each of its values instead (the
            best of each ``algorithm``, say).
        first: configurations every search measures first (hand-picked starting points; knobs
            they leave out take their first value), then the strategy takes over and learns
            from them.
        ablations: ``{name: {knob: old value}}``: the searches' best configuration with those
            knobs reset is re-timed in the same rounds (entry ``without <name>``), so each
            knob's gain is a ratio of one run and one clock.
        knobs: a sub-space to search (``{knob: values}``, :func:`tilesearch.dataset.sweep`);
            ``None`` searches the op's whole space.
        runner: ``local``, ``replay:PATH``, or a function of the problem returning either or a
            :class:`~tilesearch.runner.Runner` (a fresh one per call: the re-time needs one).
        settings: other :class:`~tilesearch.tuner.TuneSettings` of every search
            (``build_workers``, ``baseline``...); ``retime=N`` keeps each search's own final
            re-time (its choice and interval are then reported per search).
        budget_s: no search starts after this many seconds of the run (those left out are
            listed in the JSON's ``skipped``); ``None``: no limit.
        out: output directory.
        title: the plot's and table's heading.
        x: a problem parameter (``m``): the plot draws TFLOP/s against it, one line per swept
            configuration (named by the knobs of ``knobs`` that vary) and per peer, instead of
            one panel of bars per problem.
    """

    name: str
    op: str
    problems: tuple[dict[str, Any], ...]
    strategies: tuple[str, ...] = ("tpe",)
    trials: int | dict[str, int] = 64
    seeds: tuple[int, ...] = (0,)
    repeats: int = 1
    isolate: bool = False
    peers: tuple[str | Peer, ...] = ()
    top: int = 3
    top_by: str | None = None
    first: tuple[dict[str, Any], ...] = ()
    ablations: dict[str, dict[str, Any]] = field(default_factory=dict)
    knobs: dict[str, tuple[Any, ...]] | None = None
    runner: RunnerSpec = "local"
    settings: dict[str, Any] = field(default_factory=dict)
    budget_s: float | None = None
    out: str = "out"
    title: str = ""
    x: str | None = None

    def trials_of(self, strategy: str) -> int:
        return self.trials if isinstance(self.trials, int) else self.trials[strategy]

    def runner_for(self, problem: dict[str, Any]) -> str | Runner:
        return self.runner(problem) if callable(self.runner) else self.runner

    def to_dict(self) -> dict[str, Any]:
        """The declaration as plain data, written into the JSON beside the results."""
        return {"name": self.name, "op": self.op, "problems": [dict(p) for p in self.problems],
                "strategies": list(self.strategies), "trials": self.trials if isinstance(self.trials, int) else dict(self.trials), "seeds": list(self.seeds), "repeats": self.repeats, "isolate": self.isolate,
                "peers": [p if isinstance(p, str) else p.name for p in self.peers], "top": self.top, "top_by": self.top_by, "first": [dict(c) for c in self.first], "ablations": {k: dict(v) for k, v in self.ablations.items()},
                "knobs": {k: list(v) for k, v in self.knobs.items()} if self.knobs else None,
                "runner": self.runner if isinstance(self.runner, str) else "per problem",
                "settings": dict(self.settings), "budget_s": self.budget_s, "title": self.title, "x": self.x}
