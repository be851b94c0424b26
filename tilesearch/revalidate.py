"""Revalidation: an old study's results checked under the current conditions.

After an upgrade (TileLang, torch, CUDA, the driver), an edit of the operator's template, or a
move to another GPU, the old study's figures may no longer hold (see :mod:`tilesearch.provenance`).
:func:`revalidate` re-measures the old study's top configurations and the cost model's predicted
top (XGBoost trained on the old study's records, over the current space) together, through
:func:`~tilesearch.runner.retime.final_retime`, and records them in the current study. It compares
the old winner's figure with its new one, searches further (``tune`` on the current study) only
where the winner changed or lost more than the noise, and says whether the tuned kernel
regressed: the best figure after all that is worse than the old winner's old figure by more than
the noise. Figures are ratios to the baseline where both sides have one (comparable across
GPUs and versions), else latencies.
"""

from __future__ import annotations

import random
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any

import optuna

from tilesearch import registry
from tilesearch.builder import LocalBuilder, NullBuilder
from tilesearch.database import TrialRecord, TuningDatabase, find_studies, open_storage, storage_url
from tilesearch.op import Operator, Problem
from tilesearch.provenance import IDENTITY_ATTR, differences
from tilesearch.records import Candidate, Final, RunResult, Status
from tilesearch.runner import MeasureSettings, Runner
from tilesearch.runner import create as create_runner
from tilesearch.runner.retime import final_retime
from tilesearch.space import Config, Space, config_key


class RevalidateError(LookupError):
    """No old study to revalidate, or no correct trial in it."""


@dataclass(frozen=True)
class Row:
    """One configuration re-measured: where it came from, its old figures and its new result."""

    trial: int  # in the current study
    config: Config
    source: str  # "old top" or "predicted"
    old_latency_ms: float | None
    old_speedup: float | None
    new: RunResult


@dataclass(frozen=True)
class Revalidation:
    """The outcome (see the module docstring); ``regressed`` is what a CI gate checks."""

    old_study: str
    study: str
    differences: list[str]
    rows: list[Row]
    basis: str  # "speedup" or "latency"
    old_figure: float
    old_winner_now: float | None  # the old winner's figure under the current conditions
    best_now: float | None  # the best figure after the re-time and any further search
    noise: float
    winner_changed: bool
    searched: int
    regressed: bool
    replayed: bool
    final: Final | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def old_winner_lost(self) -> float | None:
        """Relative loss of the old winner (0.05: 5% worse), ``None`` if it no longer measures."""
        return None if self.old_winner_now is None else _loss(self.basis, self.old_figure, self.old_winner_now)


def _loss(basis: str, old: float, new: float) -> float:
    return 1 - new / old if basis == "speedup" else new / old - 1


def revalidate(
    op: str | Operator,
    problem: Problem | dict[str, Any] | None = None,
    *,
    study: str | None = None,
    storage: str | None = None,
    runner: str | Runner = "local",
    top: int = 5,
    predicted: int = 3,
    noise: float = 0.02,
    search: int = 16,
    strategy: str = "xgb",
    seed: int = 0,
    device: int = 0,
    build_workers: int = 0,
    run_timeout: float = 60.0,
    **params: Any,
) -> Revalidation:
    """Revalidates the old study of ``problem`` (``study``, else the latest other study of the
    problem in ``storage``, else the current one) under the current conditions.

    Args:
        top: old top configurations re-measured.
        predicted: the cost model's predicted best configurations added to them.
        noise: smallest relative change counted as a change; the re-time's own interval widens it.
        search: trials of further search, where the winner changed or lost more than the noise.
    """
    from tilesearch.tuner import open_study, tune

    operator = registry.load(op) if isinstance(op, str) else op
    op_ref = op if isinstance(op, str) else operator.name
    if problem is None:
        problem = operator.problem(**params)
    elif not isinstance(problem, Problem):
        problem = operator.problem(**{**problem, **params})
    run = create_runner(runner, device=device, timeout=run_timeout, measure=MeasureSettings(seed=seed))
    target = run.start()
    try:
        space = run.prepare(problem, operator.space(problem, target))
        db = open_study(operator, problem, target, run, storage=storage)
        old_db = TuningDatabase(storage, _old_study(storage, operator, problem, study, db.name))
        old = old_db.best(top)
        if not old:
            raise RevalidateError(f"study {old_db.name!r} has no correct trial to revalidate")
        refigured = {e.trial: e.result for e in (old_db.final().entries if old_db.final() else ())}
        picks = [(r.config, "old top") for r in old]
        picks += [(c, "predicted") for c in _predicted(operator, problem, space, target, old_db.records(), predicted,
                                                        seed, {config_key(r.config) for r in old})]
        rows, final = _remeasure(db, space, problem, target, op_ref, run, picks, build_workers)
    finally:
        run.close()
    old_rows = {config_key(r.config): r for r in old}
    rows = [Row(trial, config, source, old_rows[config_key(config)].latency_ms if source == "old top" else None,
                old_rows[config_key(config)].speedup if source == "old top" else None, result)
            for trial, config, source, result in rows]
    winner = refigured.get(old[0].number) or RunResult(Status.OK, latency_ms=old[0].latency_ms, speedup=old[0].speedup)
    basis = "speedup" if winner.speedup is not None else "latency"
    old_figure = float(winner.speedup if basis == "speedup" else winner.latency_ms)  # type: ignore[arg-type]
    now = next((r.new for r in rows if r.source == "old top" and config_key(r.config) == config_key(old[0].config)),
               None)
    now_figure = _figure(now, basis)
    width = max([noise, _half_width(winner, basis)] + ([_half_width(now, basis)] if now else []))
    chosen = final.chosen if final else None
    winner_changed = chosen is None or (config_key(chosen.config) != config_key(old[0].config)
                                        and not any(r.trial in final.ties and config_key(r.config) ==
                                                    config_key(old[0].config) for r in rows))
    lost = now_figure is None or _loss(basis, old_figure, now_figure) > width
    best_now = _figure(chosen.result, basis) if chosen else None
    searched = 0
    notes: list[str] = []
    if (winner_changed or lost) and search > 0:
        evaluated = db.evaluated()
        try:
            result = tune(operator if not isinstance(op, str) else op, problem, runner=run, storage=storage,
                          study=db.name, strategy=strategy, trials=evaluated + search, seed=seed,
                          build_workers=build_workers, run_timeout=run_timeout, device=device, progress=False)
        finally:
            run.close()
        searched = result.measured_now
        final = result.final
        if final is not None and final.chosen is not None:
            best_now = _figure(final.chosen.result, basis)
    regressed = best_now is None or _loss(basis, old_figure, best_now) > width
    return Revalidation(
        old_study=old_db.name, study=db.name,
        differences=differences(old_db.study.user_attrs.get(IDENTITY_ATTR), db.study.user_attrs[IDENTITY_ATTR]),
        rows=rows, basis=basis, old_figure=old_figure, old_winner_now=now_figure, best_now=best_now, noise=width,
        winner_changed=winner_changed, searched=searched, regressed=regressed, replayed=run.replayed, final=final,
        notes=notes,
    )


def _figure(result: RunResult | None, basis: str) -> float | None:
    if result is None or result.status != Status.OK:
        return None
    return result.speedup if basis == "speedup" else result.latency_ms


def _half_width(result: RunResult, basis: str) -> float:
    """The relative half-width of a result's 95% interval (0 without one)."""
    low, high, mid = ((result.speedup_low, result.speedup_high, result.speedup) if basis == "speedup"
                      else (result.latency_low, result.latency_high, result.latency_ms))
    return 0.0 if low is None or high is None or not mid else (high - low) / 2 / mid


def _old_study(storage: str | None, op: Operator, problem: Problem, study: str | None, current: str) -> str:
    """``study`` if given; else the other study of the problem whose last trial is the newest;
    else the current one."""
    opened = open_storage(storage)
    names = optuna.study.get_all_study_names(opened)
    if study is not None:
        if study not in names:
            raise RevalidateError(f"no study named {study!r} in {storage_url(storage)}")
        return study
    others = [n for n in find_studies(opened, op.name, problem) if n != current]
    if not others:
        if current in names and TuningDatabase(opened, current).best(1):
            return current
        raise RevalidateError(f"no study of {op.name} {problem.key} in {storage_url(storage)}; run tilesearch tune first")

    def last(name: str) -> Any:
        stamps = [t.datetime_complete for t in optuna.load_study(study_name=name, storage=opened).get_trials(
            deepcopy=False) if t.datetime_complete is not None]
        return (max(stamps).timestamp() if stamps else 0.0, name)

    return max(others, key=last)


def _predicted(op: Operator, problem: Problem, space: Space, target: Any, records: list[TrialRecord], n: int,
               seed: int, skip: set[str]) -> list[Config]:
    """The ``n`` configurations of ``space`` the cost model ranks highest after training on
    ``records`` (the op's analytic estimate alone if the model cannot be trained), ``skip`` left out."""
    if n <= 0:
        return []
    from tilesearch.cost_model import Featurizer, TrainingGroup, XGBRanker, relevance
    from tilesearch.cost_model.xgb import labels

    rng = random.Random(seed)
    if space.size <= 65536:
        pool = [c for c in space.enumerate() if config_key(c) not in skip]
    else:
        drawn = {config_key(c): c for c in (space.draw(rng) for _ in range(8192)) if space.is_valid(c)}
        pool = [c for k, c in drawn.items() if k not in skip]
    if not pool:
        return []
    featurizer = Featurizer(problem.op, op.space(problem, target), op.defaults)
    params = problem.to_dict()
    configs, tflops = labels([r for r in records if r.config])
    model = XGBRanker(seed=seed)
    if len(configs) >= 2:
        model.fit([TrainingGroup(featurizer.matrix(params, configs, target), relevance(tflops),
                                 featurizer.estimate(params, configs, target), 1.0)])
    margin = featurizer.estimate(params, pool, target)
    score = model.predict(featurizer.matrix(params, pool, target), margin) if model.trained else margin
    order = sorted(range(len(pool)), key=lambda i: (-float(score[i]), config_key(pool[i])))
    return [pool[i] for i in order[:n]]


def _remeasure(db: TuningDatabase, space: Space, problem: Problem, target: Any, op_ref: str, runner: Runner,
               picks: list[tuple[Config, str]], build_workers: int) -> tuple[list[tuple[int, Config, str, RunResult]], Final | None]:
    """Compiles ``picks``, re-times them together and records the new results in ``db``'s study
    (a configuration it holds already keeps its trial); returns ``(trial, config, source, result)``
    rows and the final choice."""
    rows: list[tuple[int, Config, str, RunResult]] = []
    opened: list[tuple[int, Candidate, str]] = []
    done = db.finished()
    fresh: set[int] = set()
    try:
        for config, source in picks:
            why = space.why_invalid(config) if set(config) <= set(space.names) else "knobs changed"
            if why:
                rows.append((-1, config, source, RunResult(Status.INVALID, error=f"no longer valid: {why}")))
                continue
            candidate = Candidate(problem.op, problem.to_dict(), dict(config), target, op_ref)
            if candidate.key in done:
                opened.append((done[candidate.key].number, candidate, source))
                continue
            trial = db.ask(space.distributions(), space.to_params(config))
            db.claim(trial, candidate)
            fresh.add(trial.number)
            opened.append((trial.number, candidate, source))
        builder = NullBuilder() if runner.replayed else LocalBuilder(build_workers or None)
        try:
            futures = [builder.submit(c) for _, c, _ in opened]
            wait(futures)
            builds = [f.result() for f in futures]
        finally:
            builder.close()
        built = [(n, c, s, b) for (n, c, s), b in zip(opened, builds)]
        for number, candidate, source, build in built:
            if not build.ok:
                if number in fresh:
                    db.record(number, build, None)
                    fresh.discard(number)
                rows.append((number, candidate.config, source, RunResult(Status.COMPILE_ERROR, error=build.error)))
        ok = [(n, c, s, b) for n, c, s, b in built if b.ok]
        final = final_retime(runner, [(n, c.config) for n, c, _, _ in ok], op=problem.op, problem=problem.to_dict(),
                             target=target, op_ref=op_ref) if ok else None
        results = {e.trial: e.result for e in final.entries} if final else {}
        for number, candidate, source, build in ok:
            if number in fresh:
                db.record(number, build, results[number])
                fresh.discard(number)
            rows.append((number, candidate.config, source, results[number]))
        if final is not None:
            db.set_final(final)
    finally:
        db.interrupt(fresh)
    return rows, final
