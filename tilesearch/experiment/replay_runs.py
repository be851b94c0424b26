"""The runs of the strategy benchmark: one strategy on one replay dataset with one seed, through
the real tuning loop (:func:`tilesearch.tune` with the replay runner), recorded in order."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from tilesearch import dataset, registry, tune
from tilesearch.builder import NullBuilder
from tilesearch.records import Candidate, Incumbent, RunResult
from tilesearch.runner import ReplayRunner
from tilesearch.space import Space
from tilesearch.strategy import GridStrategy, Proposal, SearchContext, Strategy, XGBStrategy, create
from tilesearch.strategy.hints import Hinted
from tilesearch.strategy.sampler import cmaes, gp
from tilesearch.strategy.until import Until
from tilesearch.target import Target

TARGETS = (0.97, 0.99)  # shares of a dataset's best TFLOP/s that a run is scored on reaching
OPTUNA_SAMPLERS = {"gp": gp, "cmaes": cmaes}  # Optuna's samplers that are not tilesearch strategies


class Recorder(ReplayRunner):
    """The replay runner, remembering the order in which rows were asked for."""

    def __init__(self, data: dataset.Dataset) -> None:
        super().__init__(data)
        self.seen: list[dataset.Row | None] = []
        self.best_tflops = 0.0

    def run(self, candidate: Candidate, incumbent: Incumbent | None = None) -> RunResult:
        row = self.data.get(candidate.config)
        self.seen.append(row)
        if row is not None and row.ok and row.tflops:
            self.best_tflops = max(self.best_tflops, row.tflops)
        return super().run(candidate, incumbent)


class Timed(Strategy):
    """Measures the wall time a strategy spends proposing: in all, and per round."""

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.name = inner.name
        self.polished = False  # the benchmark measures the strategy's own trials
        self.seconds = 0.0
        self.rounds: list[float] = []

    def sampler(self) -> Any:
        return self.inner.sampler()

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        start = time.perf_counter()
        try:
            return self.inner.propose(context, n)
        finally:
            self.rounds.append(time.perf_counter() - start)
            self.seconds += self.rounds[-1]


@dataclass
class Run:
    """One strategy on one dataset with one seed: figures of the measured rows, in order."""

    strategy: str
    seed: int
    tflops: list[float | None]
    latency_ms: list[float | None]
    cost_s: list[float]
    overhead_s: float
    transfer: str = ""
    error: str = ""  # why the strategy raised: the run then counts as measuring nothing

    def trials_to(self, fraction: float, best: float) -> float:
        """1-based trial at which ``fraction`` of ``best`` TFLOP/s was first reached (inf: never)."""
        for i, t in enumerate(self.tflops, 1):
            if t is not None and t >= fraction * best:
                return float(i)
        return math.inf

    def best_so_far(self, best: float) -> np.ndarray:
        values = np.array([t if t is not None else 0.0 for t in self.tflops], dtype=float)
        return np.maximum.accumulate(values) / best if len(values) else values


@dataclass
class Outcome:
    dataset: str
    size: int
    best_tflops: float
    runs: dict[str, list[Run]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    by_source: dict[str, list[Run]] = field(default_factory=dict)  # xgb+transfer from each other dataset


def make_strategy(name: str, seed: int, transfer: str = "", hints: list | None = None) -> Strategy:
    """``base[+transfer][+carver]``: a registered strategy, ``xgb`` warm-started from ``transfer``,
    seeded with Carver's ``hints``."""
    base, *mods = name.split("+")
    unknown = set(mods) - {"transfer", "carver"} or ({"transfer"} & set(mods) if base != "xgb" else set())
    if unknown:
        raise SystemExit(f"strategy {name!r}: unknown or unsupported modifier {sorted(unknown)}")
    if base == "xgb":
        strategy: Strategy = XGBStrategy(seed, transfer=[transfer] if "transfer" in mods else [], auto_transfer=False)
    elif base in OPTUNA_SAMPLERS:
        strategy = OPTUNA_SAMPLERS[base](seed)
    else:
        strategy = create(base, seed)
    if "carver" in mods:
        strategy = Hinted(strategy, "carver")
        strategy.hints = hints
    return strategy


def dataset_space(data: dataset.Dataset) -> Space:
    """The op's space of the dataset's problem, restricted to the knob values it recorded."""
    op = registry.load(data.op)
    return data.restrict(op.space(op.problem(**data.problem), Target.from_dict(data.meta["target"])))


def _run(name: str, seed: int, rows: Sequence[dataset.Row | None], overhead_s: float, transfer: str = "",
         error: str = "") -> Run:
    share = overhead_s / max(len(rows), 1)
    return Run(
        strategy=name, seed=seed,
        tflops=[r.tflops if r is not None and r.ok else None for r in rows],
        latency_ms=[r.latency_ms if r is not None and r.ok else None for r in rows],
        cost_s=[(r.compile_s or 0.0) + (r.measure_s or 0.0) + share if r is not None else share for r in rows],
        overhead_s=overhead_s, transfer=Path(transfer).name if transfer else "", error=error,
    )


def run_one(data: dataset.Dataset, name: str, seed: int, *, horizon: int, cap: int, batch: int,
            transfer: str = "", hints: list | None = None) -> Run:
    """Runs ``name`` on ``data`` until ``horizon`` trials and 99% of the best are both reached, or
    ``cap`` trials. ``grid`` and ``random`` walk a fixed order of the space, which is read from the
    strategy directly (the tuning loop would measure exactly that order) and walked to the end."""
    strategy = make_strategy(name, seed, transfer, hints)
    if isinstance(strategy, GridStrategy):
        start = time.perf_counter()
        order = strategy.order(SimpleNamespace(space=dataset_space(data)))  # type: ignore[arg-type]
        return _run(name, seed, [data.get(c) for c in order], time.perf_counter() - start)
    runner = Recorder(data)
    best = data.best().tflops
    timed = Timed(strategy)

    def done(_: SearchContext) -> bool:
        return len(runner.seen) >= cap or (len(runner.seen) >= horizon and runner.best_tflops >= max(TARGETS) * best)

    builder = NullBuilder()
    builder.workers = batch - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune(data.op, data.problem, strategy=Until(timed, done), runner=runner, builder=builder, storage=":memory:",
             trials=len(data), seed=seed, progress=False)
    return _run(name, seed, runner.seen, timed.seconds, transfer)


def sources(data: dataset.Dataset, others: Sequence[dataset.Dataset]) -> list[dataset.Dataset]:
    """The datasets ``data`` may transfer from: the same op and GPU, another problem."""
    return [o for o in others if o is not data and o.op == data.op and o.meta.get("gpu") == data.meta.get("gpu")
            and o.problem != data.problem]


def nearest(data: dataset.Dataset, others: Sequence[dataset.Dataset]) -> dataset.Dataset | None:
    """The other dataset of the same op and GPU whose problem is closest (log2 of the sizes,
    then dtype and layout)."""

    def distance(other: dataset.Dataset) -> float:
        a, b = data.problem, other.problem
        d = sum(abs(math.log2(a[k]) - math.log2(b[k])) for k in a if isinstance(a[k], int) and k in b)
        return d + sum(2.0 for k in a if not isinstance(a[k], int) and a[k] != b.get(k))

    same = sources(data, others)
    return min(same, key=lambda o: (distance(o), o.name)) if same else None


# -- Willemsen et al. (2024) score ------------------------------------------------------------
