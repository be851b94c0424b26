"""Recorded runs of the field's strategies (Optuna's and Kernel Tuner's) on replay datasets, so
that comparing ours with them re-runs only ours.

Why: on the committed datasets the peers' runs were three quarters of the field benchmark's CPU
time (Optuna's CMA-ES alone about 1,400 CPU-s: one seed asks 8,573 times for 168 measured rows of
a 1,670-row GEMM sample), which made ``tests/test_field_benchmark.py`` some 50 of CI's 90 minutes
on the 2-core machine (December 2026). Their runs change only when a dataset, a peer's version or
the harness that drives them (:func:`tilesearch.experiment.field.optuna_run`,
:mod:`tilesearch.experiment.kernel_tuner`) changes; ours change with every commit and are always run.

A record (gzip'd JSON, format ``tilesearch-peer-runs``) holds, per dataset (its file name and the
sha256 of its bytes) and per strategy, horizon and cap, the runs of every seed
(:class:`~tilesearch.experiment.replay_runs.Run`: the measured rows' figures in order, the tuner's
own seconds), and the peers' versions, date, commit and command of the recording. Which rows a run
measures, in which order, is fixed by its seed; its tuner's own seconds (part of the Willemsen
score) were measured when it was recorded, on the recording machine.

How a record is trusted: :meth:`Record.stale` says why it does not fit the datasets and installed
peers at hand, and :func:`verify` runs one seed of each recorded (dataset, strategy) again and
compares what it measured, row by row, with the record (the seeds differ between pairs, so all are
checked across them). The field benchmark takes a record with ``--peers FILE`` and writes one with
``--record-peers FILE``.
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tilesearch import dataset
from tilesearch.experiment.record import commit
from tilesearch.experiment.replay_runs import Run
from tilesearch.experiment.scores import score_setup, willemsen_score
from tilesearch.experiment.strategies import budget, executor
from tilesearch.versions import package

FORMAT, VERSION = "tilesearch-peer-runs", 1
PACKAGES = ("optuna", "kernel_tuner", "cmaes")  # what a recorded run depends on beyond the harness


def versions() -> dict[str, str]:
    return {name: package(name.replace("_", "-")) for name in PACKAGES}


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _key(horizon: int, cap: int) -> str:
    return f"horizon={horizon},cap={cap}"


class Record:
    """The peers' runs of one file (empty if it does not exist yet); see the module docstring."""

    def __init__(self, path: str | Path, meta: dict[str, Any] | None = None,
                 datasets: dict[str, dict[str, Any]] | None = None) -> None:
        self.path = Path(path)
        self.meta = meta or {}
        # name -> {"sha256": ..., "runs": {strategy: {budget: {"recorded": provenance, "runs": [run dicts]}}}}
        self.datasets = datasets or {}
        self._added: set[tuple[str, str, str]] = set()

    @classmethod
    def load(cls, path: str | Path) -> Record:
        path = Path(path)
        if not path.exists():
            return cls(path)
        raw = json.loads(gzip.decompress(path.read_bytes()))
        if raw.get("format") != FORMAT or raw.get("version") != VERSION:
            raise ValueError(f"{path} is not a {FORMAT} file of version {VERSION}")
        return cls(path, {k: v for k, v in raw.items() if k != "datasets"}, raw["datasets"])

    def runs(self, data: str, strategy: str, horizon: int, cap: int) -> list[Run] | None:
        """The recorded runs, in seed order, or None if there are none for this budget."""
        found = self.datasets.get(data, {}).get("runs", {}).get(strategy, {}).get(_key(horizon, cap))
        return [Run(**r) for r in found["runs"]] if found is not None else None

    def entries(self) -> Iterable[tuple[str, str, int, int]]:
        """(dataset, strategy, horizon, cap) of every recorded set of runs, sorted."""
        for name in sorted(self.datasets):
            for strategy, budgets in sorted(self.datasets[name]["runs"].items()):
                for key in sorted(budgets):
                    horizon, cap = (int(part.split("=")[1]) for part in key.split(","))
                    yield name, strategy, horizon, cap

    def add(self, data: dataset.Dataset, strategy: str, horizon: int, cap: int, runs: Sequence[Run],
            command: str) -> None:
        """Keeps ``runs`` (every seed's, in order) of ``strategy`` on ``data`` at this budget,
        made by ``command`` at the current commit."""
        digest = sha256(data.path)
        entry = self.datasets.setdefault(data.name, {"sha256": digest, "runs": {}})
        if entry["sha256"] != digest:  # the dataset changed: its older runs no longer hold
            entry.update(sha256=digest, runs={})
        provenance = {"command": command, "commit": commit(),
                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        entry["runs"].setdefault(strategy, {})[_key(horizon, cap)] = {
            "recorded": provenance, "runs": [dataclasses.asdict(r) for r in runs]}
        self._added.add((data.name, strategy, _key(horizon, cap)))

    def save(self) -> None:
        """Writes the file whole, through a temporary file, so a killed run leaves the old one.
        If the peers installed are not those the file was recorded with, only the runs added
        here are kept."""
        installed = versions()
        if self.meta.get("versions") not in (None, installed):
            for name, entry in self.datasets.items():
                entry["runs"] = {s: kept for s, budgets in entry["runs"].items()
                                 if (kept := {k: v for k, v in budgets.items() if (name, s, k) in self._added})}
        self.meta = {"format": FORMAT, "version": VERSION, "versions": installed, "python": sys.version.split()[0]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.compress(json.dumps({**self.meta, "datasets": self.datasets}, indent=0).encode(),
                                      mtime=0))
        os.replace(tmp, self.path)

    def stale(self, datasets: Sequence[dataset.Dataset]) -> list[str]:
        """Why the record does not fit ``datasets`` and the peers installed: one line each."""
        installed = versions()
        reasons = [f"{name} {old} recorded, {new} installed" for name, old in self.meta.get("versions", {}).items()
                   if (new := installed.get(name)) != old]
        for data in datasets:
            entry = self.datasets.get(data.name)
            if entry is None:
                reasons.append(f"{data.name}: not recorded")
            elif entry["sha256"] != sha256(data.path):
                reasons.append(f"{data.name}: the dataset changed since it was recorded")
        return reasons


def verify(record: Record, datasets: Sequence[dataset.Dataset], strategies: Sequence[str],
           run: Callable[..., Run], jobs: int = 1) -> list[str]:
    """Runs one seed of each recorded (dataset, strategy of ``strategies``, budget) again with
    ``run`` (the field benchmark's); one line for each whose measured rows differ from the
    record's. The seed is the pair's position modulo its seeds, so different pairs check
    different seeds; where a seed raised, that seed (the later ones were not run)."""
    by_name = {d.name: d for d in datasets}
    tasks = []
    for i, (name, strategy, horizon, cap) in enumerate(
            e for e in record.entries() if e[0] in by_name and e[1] in strategies):
        recorded = record.runs(name, strategy, horizon, cap) or []
        raised = next((r for r in recorded if r.error), None)
        if raised is not None:  # the seeds after it were not run (field.Runs): the one that raised is checked
            tasks.append((by_name[name], strategy, raised, horizon, cap))
        elif recorded:
            tasks.append((by_name[name], strategy, recorded[i % len(recorded)], horizon, cap))
    with executor(jobs) as pool:
        again = [f.result() for f in [pool.submit(_again, run, task) for task in tasks]]
    return [line for line in again if line]


def _again(run: Callable[..., Run], task: tuple[dataset.Dataset, str, Run, int, int]) -> str:
    data, strategy, recorded, horizon, cap = task
    now = run(data, strategy, recorded.seed, horizon=horizon, cap=cap, batch=1)
    if (now.tflops, now.latency_ms, now.error) == (recorded.tflops, recorded.latency_ms, recorded.error):
        return ""
    same = next((i for i, (a, b) in enumerate(zip(now.tflops, recorded.tflops)) if a != b),
                min(len(now.tflops), len(recorded.tflops)))
    return (f"{data.name} {strategy} seed {recorded.seed}: measured {len(now.tflops)} rows, recorded "
            f"{len(recorded.tflops)}; they differ from row {same + 1}" + (f" ({now.error})" if now.error else ""))


def complete(record: Record, datasets: Sequence[dataset.Dataset], strategy: str, args: Any) -> bool:
    """Whether ``record`` has ``args.seeds`` runs of ``strategy`` on each of ``datasets`` at the
    benchmark's budget (:func:`~tilesearch.experiment.strategies.budget`)."""
    return all(len(record.runs(d.name, strategy, *budget(d, args)) or []) >= args.seeds for d in datasets)


def serve(outcomes: Sequence[Any], datasets: Sequence[dataset.Dataset], record: Record, strategies: Sequence[str],
          args: Any) -> None:
    """Adds the first ``args.seeds`` recorded runs of ``strategies`` to ``outcomes`` (one per
    dataset, from :func:`~tilesearch.experiment.strategies.benchmark`), scored as the benchmark
    scores its own, and orders each outcome's runs as ``args.strategies``."""
    by_name = {d.name: d for d in datasets}
    order = {name: i for i, name in enumerate(args.strategies)}
    for outcome in outcomes:
        data = by_name[outcome.dataset]
        setup = score_setup(data, args.cutoff, args.cutoff_start)
        for strategy in strategies:
            runs = (record.runs(data.name, strategy, *budget(data, args)) or [])[:args.seeds]
            outcome.runs[strategy] = runs
            outcome.scores[strategy] = [willemsen_score(r, setup) for r in runs]
        outcome.runs = dict(sorted(outcome.runs.items(), key=lambda item: order.get(item[0], len(order))))
