"""One study tuned by several tuning processes on this host, one per GPU.

Each tuning process is the ordinary tuning loop (:func:`tilesearch.tuner.tune`) with its own
runner (and its worker process) on its own GPU and its own share of the cores for its compile
pool; the tuning processes meet only in the storage, where claims keep them from measuring a
configuration twice (:mod:`tilesearch.claim`). Tuning processes on other hosts join the same
study with ``tilesearch worker ... storage=postgresql://...``. Tuning process ``i`` seeds its
strategy with ``seed + i`` so that they do not all propose the same configurations first.

The user-facing names ``tilesearch worker``, ``workers=N`` and ``build_workers`` predate these
words and stay, so that users' commands and scripts keep working: ``worker``/``workers`` there
count tuning processes, ``build_workers`` the worker processes of one compile pool (see the
README's "Words").
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tilesearch import registry
from tilesearch.builder.local import default_workers
from tilesearch.database import TrialRecord, TuningDatabase, storage_url
from tilesearch.dataset import narrow
from tilesearch.target import Target
from tilesearch.tuner import TuneResult, TuneSettings, tune
from tilesearch.workers import resolve

_CTX = mp.get_context("spawn")


class SharedStorageError(ValueError):
    """Tuning processes need a storage they can all open."""


@dataclass(frozen=True)
class TuningOutcome:
    """How one tuning process ended: its result, or the error (or exit code) that ended it."""

    index: int
    gpu: int
    result: TuneResult | None = None
    error: str | None = None


@dataclass
class ParallelResult:
    """The tuning processes' outcomes and the study's best trials after all of them stopped."""

    study: str | None
    storage: str
    processes: list[TuningOutcome]
    best: list[TrialRecord] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def workers(self) -> list[TuningOutcome]:
        """The old name of :attr:`processes`, kept for users' scripts."""
        return self.processes

    @property
    def measured_now(self) -> int:
        return sum(w.result.measured_now for w in self.processes if w.result is not None)

    @property
    def statuses(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for w in self.processes:
            for status, n in (w.result.statuses if w.result else {}).items():
                total[status] = total.get(status, 0) + n
        return total


def tune_parallel(
    op: str,
    problem: dict[str, Any],
    *,
    gpus: Sequence[int],
    settings: TuneSettings | None = None,
    runner: str | None = None,
    runner_kwargs: dict[str, Any] | None = None,
    knobs: Mapping[str, Sequence[Any]] | None = None,
) -> ParallelResult:
    """Tunes ``op`` on ``problem`` with one tuning process per entry of ``gpus``.

    Args:
        op: registered operator name or import path (each tuning process loads it itself).
        problem: the problem's parameters.
        gpus: CUDA device index of each tuning process.
        settings: shared settings; ``trials`` counts the whole study. ``build_workers`` is the
            compile pool of each tuning process (default: the cores split evenly between them).
        runner: import path of ``f(settings, **runner_kwargs) -> Runner`` to use instead of a
            :class:`~tilesearch.runner.LocalRunner` on the process's GPU (tests).
        runner_kwargs: keyword arguments for ``runner``.
        knobs: search only these values of these knobs (the op's constraints kept, for
            ``settings.arch``, default ``sm_90a``): each tuning process narrows the op's space itself,
            as a space's constraints do not cross processes.
    """
    settings = settings or TuneSettings()
    url = storage_url(settings.storage)
    if url == ":memory:":
        raise SharedStorageError("storage=:memory: cannot be shared between tuning processes; use a file")
    if not gpus:
        raise ValueError("gpus must name at least one device")
    cores = settings.build_workers or max(1, default_workers() // len(gpus))
    start = time.perf_counter()
    queue = _CTX.Queue()
    procs = []
    for i, gpu in enumerate(gpus):
        mine = replace(
            settings, storage=url, device=gpu, seed=settings.seed + i, build_workers=cores, progress=False
        )
        proc = _CTX.Process(
            target=_work, args=(queue, i, gpu, op, problem, mine, runner, runner_kwargs or {}, knobs),
            name=f"tuner-{i}",
        )
        proc.start()
        procs.append(proc)
    outcomes = _collect(queue, procs, gpus)
    study = next((w.result.study for w in outcomes if w.result is not None), settings.study)
    best = TuningDatabase(url, study).best(10) if study else []
    return ParallelResult(study, url, outcomes, best, time.perf_counter() - start)


def _work(queue: Any, index: int, gpu: int, op: str, problem: dict[str, Any], settings: TuneSettings,
          runner: str | None, runner_kwargs: dict[str, Any], knobs: Mapping[str, Sequence[Any]] | None) -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        made = resolve(runner)(settings, **runner_kwargs) if runner else None
        space = None
        if knobs:
            operator = registry.load(op)
            target = Target.from_arch(settings.arch or "sm_90a")
            space = narrow(operator.space(operator.problem(**problem), target), knobs)
        try:
            result = tune(op, problem, settings=settings, runner=made, space=space)
        finally:
            if made is not None:
                made.close()
        queue.put(TuningOutcome(index, gpu, result=result))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent, which goes on
        queue.put(TuningOutcome(index, gpu, error=f"{type(exc).__name__}: {exc}"))


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _collect(queue: Any, procs: list[Any], gpus: Sequence[int]) -> list[TuningOutcome]:
    outcomes: dict[int, TuningOutcome] = {}
    try:
        while len(outcomes) < len(procs):
            try:
                outcome = queue.get(timeout=1.0)
                outcomes[outcome.index] = outcome
            except Exception:  # queue.Empty: look for tuning processes that died without a word
                for i, proc in enumerate(procs):
                    if i not in outcomes and not proc.is_alive() and queue.empty():
                        outcomes[i] = TuningOutcome(i, gpus[i], error=f"tuning process exited with code {proc.exitcode}")
    except BaseException:
        for proc in procs:
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)  # each records its trials in flight as interrupted
        for proc in procs:
            proc.join(timeout=30)
        raise
    for proc in procs:
        proc.join(timeout=30)
    return [outcomes[i] for i in range(len(procs))]
