"""The experiment runner: what every study does, once.

For each problem: tune it with each strategy and seed (:func:`tilesearch.tune`, its own study in
the experiment's storage, so a killed run resumes), then re-time the top configurations of every
search together with the peers and the baseline in one call of the runner's re-time
(:meth:`~tilesearch.runner.Runner.retime`: fresh workers, interleaved rounds, pooled intervals) and
rank them (:func:`tilesearch.runner.retime.select`: best and tie set). Searches are compared by
the re-time, never by figures taken minutes apart. :mod:`tilesearch.experiment.output` writes
the results.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tilesearch import dataset, registry
from tilesearch.experiment import output
from tilesearch.experiment.config import Experiment
from tilesearch.experiment.peers import resolve
from tilesearch.records import Candidate, Retimed, Status
from tilesearch.runner import MeasureSettings, Runner
from tilesearch.runner import create as create_runner
from tilesearch.runner.retime import select
from tilesearch.space import digest
from tilesearch.tuner import tune

log = logging.getLogger("tilesearch.experiment")


@dataclass(frozen=True)
class Search:
    """One search of one problem: strategy, seed, and what it found (the search's own figures)."""

    strategy: str
    seed: int
    repeat: int
    trials: int
    measured_now: int
    wall_s: float
    best_ms: float | None
    best_config: dict[str, Any] | None
    statuses: dict[str, int]
    study: str
    final: dict[str, Any] | None = None
    """The search's own final re-time (``settings={"retime": N}``): the choice's figures, the
    tie set, the clock."""

    @property
    def label(self) -> str:
        return f"{self.strategy}/{self.seed}" + (f"/r{self.repeat}" if self.repeat else "")


def run(experiment: Experiment, *, out: str | Path | None = None) -> dict[str, Any]:
    """Runs ``experiment`` and writes ``<out>/<name>.{json,txt,png,log}``; returns the JSON dict
    (``out`` overrides ``experiment.out``). The table is printed last."""
    out = Path(out or experiment.out)
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / f"{experiment.name}.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        peers = [resolve(p) for p in experiment.peers]
        storage = f"sqlite:///{out / (experiment.name + '.db')}"
        clock = _Budget(experiment.budget_s)
        problems = [_problem(experiment, p, storage, peers, clock) for p in experiment.problems]
        result = {"experiment": experiment.to_dict(), "problems": problems, "skipped": clock.skipped,
                  "replayed": any(p["replayed"] for p in problems), "wall_s": clock.elapsed()}
        output.write(result, out, experiment.name)
    finally:
        log.removeHandler(handler)
        handler.close()
    print(output.table(result))
    return result


class _Budget:
    """The run's time budget: whether a search may still start; what was left out."""

    def __init__(self, budget_s: float | None) -> None:
        self.budget_s, self.start, self.skipped = budget_s, time.perf_counter(), []

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def allows(self, what: str) -> bool:
        if self.budget_s is None or self.elapsed() <= self.budget_s:
            return True
        self.skipped.append(what)
        log.info("budget of %.0f s spent: %s left out", self.budget_s, what)
        return False


def _problem(experiment: Experiment, params: dict[str, Any], storage: str, peers: list[Any],
             clock: _Budget) -> dict[str, Any]:
    operator = registry.load(experiment.op)
    problem = operator.problem(**params)
    searches, tops, target, replayed, best = [], {}, None, False, None
    for strategy in experiment.strategies:
        for seed in experiment.seeds:
            for repeat in range(experiment.repeats):
                if not clock.allows(f"{problem.key} {strategy}/{seed}/r{repeat}"):
                    continue
                search, found = _search(experiment, operator, problem, storage, strategy, seed, repeat)
                searches.append(search)
                target, replayed = found.target, replayed or found.replayed
                if found.best and (best is None or found.best[0].latency_ms < best.latency_ms):
                    best = found.best[0]
                for label, config in _tops(experiment, search, found, storage):
                    tops.setdefault(digest(config), (label, config))
    variants, ablations = _ablations(experiment, operator, problem, best.config, target) if best else ([], {})
    retime = _retime(experiment, problem, list(tops.values()), variants, peers, target) if tops and target else None
    if retime:
        retime["ablations"] = _gains(retime, tops[digest(best.config)][0], ablations)
    return {"problem": problem.to_dict(), "key": problem.key, "flops": operator.flops(problem),
            "searches": [{**asdict(s), "label": s.label} for s in searches], "retime": retime,
            "replayed": replayed or bool(retime and retime["replayed"])}


def _tops(experiment: Experiment, search: Search, found: Any, storage: str) -> list[tuple[str, dict[str, Any]]]:
    """What a search sends to the re-time: its ``top`` best, or the best of each value of
    ``top_by`` (from every record of its study)."""
    if not experiment.top_by:
        return [(f"{search.label}#{rank + 1}", dict(r.config)) for rank, r in enumerate(found.best[:experiment.top])]
    from tilesearch.database import TuningDatabase

    best: dict[Any, dict[str, Any]] = {}
    for record in TuningDatabase(found.storage or storage, found.study).best(10**9):  # fastest first
        best.setdefault(record.config.get(experiment.top_by), dict(record.config))
    return [(f"{search.label} {experiment.top_by}={value}", config) for value, config in best.items()]


def _strategy(experiment: Experiment, operator: Any, problem: Any, space: Any, name: str, seed: int) -> Any:
    """``name`` (seeded), after ``experiment.first`` completed with each knob's first value."""
    if not experiment.first:
        return name
    from tilesearch.strategy import create
    from tilesearch.strategy.hints import Hinted
    from tilesearch.target import Target

    knobs = (space or operator.space(problem, Target.from_arch("sm_90a"))).knobs
    defaults = {knob.name: knob.values()[0] for knob in knobs}
    first = [{**defaults, **c} for c in experiment.first]
    return Hinted(create(name, seed), first, n=len(first))


def _search(experiment: Experiment, operator: Any, problem: Any, storage: str, strategy: str, seed: int,
            repeat: int) -> tuple[Search, Any]:
    """One search (its own study, so a killed run resumes it) and its row."""
    space = None
    if experiment.knobs:
        from tilesearch.target import Target

        space = dataset.sweep(operator.space(problem, Target.from_arch("sm_90a")), experiment.knobs)
    log.info("tune %s %s strategy=%s seed=%d repeat=%d trials=%d", experiment.op, problem.key, strategy, seed,
             repeat, experiment.trials_of(strategy))
    settings = {"progress": False, "retime": 0, **experiment.settings}
    study = f"{experiment.name}:{problem.key}:{strategy}:{seed}" + (f":{repeat}" if repeat else "")
    if experiment.isolate:
        storage = _cleared_storage(storage, study)
    runner = experiment.runner_for(problem.to_dict())
    with runner if isinstance(runner, Runner) else contextlib.nullcontext():  # an object is ours to close
        found = (_tune_in_fresh_process if experiment.isolate else tune)(
            experiment.op, problem, strategy=_strategy(experiment, operator, problem, space, strategy, seed),
            runner=runner, space=space, trials=experiment.trials_of(strategy),
            seed=seed, storage=storage, study=study, **settings)
    best = found.best[0] if found.best else None
    final = None
    if found.final is not None and found.final.chosen is not None:
        chosen = found.final.chosen.result
        final = {"config": found.final.chosen.config, "ties": len(found.final.ties), "basis": found.final.basis,
                 **{k: getattr(chosen, k) for k in ("latency_ms", "speedup", "speedup_low", "speedup_high",
                                                     "sm_clock_mhz", "power_w", "temp_c", "throttled")},
                 **{k: chosen.extra[k] for k in ("processes", "process_figures") if k in chosen.extra},
                 # every configuration of the final, so that two searches' finals can be compared
                 # on the configurations both re-timed (measurement), apart from what each found (search)
                 "entries": [{"trial": e.trial, "config": e.config,
                              **{k: getattr(e.result, k) for k in ("speedup", "speedup_low", "speedup_high")}}
                             for e in found.final.entries if e.result.status == Status.OK]}
    search = Search(strategy, seed, repeat, experiment.trials_of(strategy), found.measured_now, found.wall_s,
                    best.latency_ms if best else None, dict(best.config) if best else None, dict(found.statuses),
                    found.study, final)
    log.info("  %s", search)
    return search, found


def _cleared_storage(storage: str, study: str) -> str:
    """A storage of the search's own, next to the experiment's, deleted first: nothing of an
    earlier search (its trials, or the model ``xgb`` learns from the op's other studies) reaches
    this one."""
    experiment_db = Path(storage.removeprefix("sqlite:///"))
    path = experiment_db.parent / f"{experiment_db.stem}-studies" / f"{digest(study)[:12]}.db"
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    return f"sqlite:///{path}"


def _tune_in_fresh_process(*args: Any, **kwargs: Any) -> Any:
    """:func:`tilesearch.tune` in a new Python process, as a user's ``tilesearch tune`` runs:
    no imported module, CUDA context or cache of this process carries over. The child's own
    signals and exit stop the experiment as they would stop the user's command."""
    import pickle
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        call, result = Path(tmp, "call.pkl"), Path(tmp, "result.pkl")
        call.write_bytes(pickle.dumps((args, kwargs)))
        code = ("import pickle, sys; from tilesearch.tuner import tune; a, k = pickle.loads(open(sys.argv[1], 'rb').read()); "
                "r = tune(*a, **k); getattr(k.get('runner'), 'close', lambda: None)(); "
                "open(sys.argv[2], 'wb').write(pickle.dumps(r))")
        done = subprocess.run([sys.executable, "-c", code, str(call), str(result)])
        if done.returncode:
            raise SystemExit(done.returncode)
        return pickle.loads(result.read_bytes())


def _ablations(experiment: Experiment, operator: Any, problem: Any, best: dict[str, Any],
               target: Any) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, dict[str, Any]]]:
    """The variants of ``best`` to re-time (``without <name>``), and per ablation what became of
    it: ``measured``, ``same`` (the best has the old values already) or ``invalid`` (with the
    space's reason; one that compiles the same kernel as another says so there)."""
    space = operator.space(problem, target)
    variants, notes = [], {}
    for name, old in experiment.ablations.items():
        flipped = {**best, **{k: v for k, v in old.items() if k in best}}
        why = space.why_invalid(flipped)
        if flipped == best:
            notes[name] = {"status": "same"}
        elif why:
            notes[name] = {"status": "invalid", "reason": why}
        else:
            notes[name] = {"status": "measured"}
            variants.append((f"without {name}", flipped))
    return variants, notes


def _gains(retime: dict[str, Any], best_label: str, notes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each measured ablation's gain: its latency / the best's, both from the same rounds."""
    ms = {e["label"]: e["result"].get("latency_ms") for e in retime["entries"]}
    for name, note in notes.items():
        if note["status"] == "measured" and ms.get(best_label) and ms.get(f"without {name}"):
            note["gain"] = ms[f"without {name}"] / ms[best_label]
        elif note["status"] == "same":
            note["gain"] = 1.0
    return notes


def _retime(experiment: Experiment, problem: Any, tops: list[tuple[str, dict[str, Any]]],
            variants: list[tuple[str, dict[str, Any]]], peers: list[Any], target: Any) -> dict[str, Any]:
    """The top configurations of every search, the ablations' variants and the peers, timed
    together in one call; the tops alone are ranked (best and tie set)."""
    settings = experiment.settings  # the searches' measuring settings, for the re-time too
    runner = create_runner(experiment.runner_for(problem.to_dict()), device=settings.get("device", 0),
                           timeout=settings.get("run_timeout", 60.0),
                           measure=MeasureSettings(baseline=settings.get("baseline", True)))
    start = time.perf_counter()
    try:
        runner.start()  # the search's target (its arch override kept), measured on this runner
        candidates = [Candidate(problem.op, problem.to_dict(), config, target, experiment.op)
                      for _, config in tops + variants]
        log.info("re-time %d configurations and %d peers together", len(candidates), len(peers))
        results = runner.retime(candidates, peers)
    finally:
        runner.close()
    ours, ablated, theirs = results[:len(tops)], results[len(tops):len(candidates)], results[len(candidates):]
    final = select([Retimed(i, config, r) for i, ((_, config), r) in enumerate(zip(tops, ours))],
                   together=bool(ours) and all("retimed_together" in r.extra for r in ours if r.status == Status.OK),
                   replayed=runner.replayed)
    entries = [{"label": tops[e.trial][0], "kind": "tilesearch", "config": e.config, "result": e.result.to_dict()}
               for e in final.entries]
    entries += [{"label": label, "kind": "ablation", "config": config, "result": r.to_dict()}
                for (label, config), r in zip(variants, ablated)]
    entries += [{"label": p.name, "kind": "peer", "config": None, "result": r.to_dict()} for p, r in zip(peers, theirs)]
    for entry in entries:
        log.info("  %s %s", entry["label"], entry["result"])
    return {"entries": entries, "ties": [tops[t][0] for t in final.ties], "basis": final.basis,
            "together": final.together, "replayed": final.replayed, "wall_s": time.perf_counter() - start}
