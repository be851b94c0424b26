"""Parallel compilation in a compile pool of isolated worker processes (TVM lowering holds the
GIL: threads do not scale). Compiled kernels land in TileLang's disk cache, where the runner's worker finds them."""

from __future__ import annotations

import os
import queue
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from tilesearch.builder.base import Builder
from tilesearch.records import BuildResult, Candidate
from tilesearch.workers import IsolatedWorker


def compile_candidate(candidate: Candidate) -> tuple[float, float]:
    """Runs in a worker process of the compile pool: compiles one candidate; returns the seconds
    it took and, of those, the seconds spent waiting on compiler processes (nvcc and the host
    compiler, which TileLang runs through :mod:`subprocess`; the rest is lowering in Python)."""
    from tilesearch.op import Problem

    op = candidate.load_op()
    start = time.perf_counter()
    with _timed_subprocesses() as tools:
        op.build(Problem(op.name, candidate.problem), candidate.config, candidate.target)
    return time.perf_counter() - start, tools[0]


@contextmanager
def _timed_subprocesses() -> Iterator[list[float]]:
    """Adds up the wall time of ``subprocess.run`` and ``Popen.communicate`` calls meanwhile."""
    spent = [0.0]
    run, communicate = subprocess.run, subprocess.Popen.communicate

    def timed(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - began
        return call

    subprocess.run, subprocess.Popen.communicate = timed(run), timed(communicate)  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        subprocess.run, subprocess.Popen.communicate = run, communicate  # type: ignore[method-assign]


def warm_up() -> None:
    """Runs in a worker process of the compile pool when it starts: imports TileLang, so the first compile does not pay for it."""
    import tilelang  # noqa: F401


def default_workers() -> int:
    return max(1, (os.cpu_count() or 2) - 1)


class LocalBuilder(Builder):
    """Compiles in ``workers`` processes on this machine, each call limited to ``timeout`` s.

    The processes start at once and import TileLang in the background, so that they are ready by
    the time the first candidates come (``tune`` creates its builder before starting the runner).

    Args:
        workers: worker processes in the compile pool (default: all cores but one).
        timeout: seconds one compilation may take before its worker is killed and restarted.
    """

    def __init__(self, workers: int | None = None, timeout: float = 300.0) -> None:
        self.workers = workers or default_workers()
        self.timeout = timeout
        # builders never touch a GPU: compiling for an explicit target needs none
        env = {"CUDA_VISIBLE_DEVICES": ""}
        self._idle: queue.Queue[IsolatedWorker] = queue.Queue()
        self._all = [IsolatedWorker(env=env, name=f"builder-{i}") for i in range(self.workers)]
        for worker in self._all:
            self._idle.put(worker)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="build")
        for _ in self._all:
            self._pool.submit(self._warm)

    def submit(self, candidate: Candidate) -> Future[BuildResult]:
        return self._pool.submit(self._build, candidate)

    def _build(self, candidate: Candidate) -> BuildResult:
        worker = self._idle.get()
        try:
            start = time.perf_counter()
            result = worker.call(
                "tilesearch.builder.local:compile_candidate", candidate, timeout=self.timeout
            )
            if result.ok:
                total, tools = result.value
                return BuildResult(candidate, ok=True, compile_s=float(total), tools_s=float(tools))
            return BuildResult(
                candidate,
                ok=False,
                error=result.error or "unknown error",
                compile_s=time.perf_counter() - start,
                timed_out=result.timed_out,
            )
        finally:
            self._idle.put(worker)

    def _warm(self) -> None:
        worker = self._idle.get()
        try:
            worker.call("tilesearch.builder.local:warm_up", timeout=self.timeout)  # a failure shows at compile time
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        IsolatedWorker.close_all(self._all)
