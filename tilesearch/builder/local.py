"""Parallel compilation in a compile pool of isolated worker processes (TVM lowering holds the
GIL: threads do not scale). Compiled kernels land in TileLang's disk cache, where the runner's worker finds them.

**Batches.** While more candidates wait than the pool has workers, a worker takes several at once
(up to ``batch``) and compiles their device code in one compiler run
(:mod:`tilesearch.builder.batch`), which pays for parsing the headers once; while fewer wait,
each goes alone, so that the first results come as soon as one compile allows. A batch whose
call fails as a whole (a timeout, a crash) is compiled again one candidate at a time, so that a
failure is the failing candidate's own.
"""

from __future__ import annotations

import math
import os
import queue
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any

from tilesearch.builder import compiler
from tilesearch.builder.base import Builder
from tilesearch.records import BuildResult, Candidate
from tilesearch.workers import IsolatedWorker, no_fork_server, preload, start_fork_server


def compile_candidate(candidate: Candidate) -> tuple[float, float]:
    """Runs in a worker process of the compile pool: compiles one candidate; returns the seconds
    it took and, of those, the seconds spent waiting on compiler processes (nvcc and the host
    compiler, which TileLang runs through :mod:`subprocess`; the rest is lowering in Python)."""
    op = candidate.load_op()
    start, in_nvrtc = time.perf_counter(), compiler.spent()
    with _timed_subprocesses() as tools:
        candidate.build(op)
    return time.perf_counter() - start, tools[0] + compiler.spent() - in_nvrtc


def compile_candidates(candidates: list[Candidate]) -> list[tuple[float, float, str | None]]:
    """Runs in a worker process of the compile pool: compiles ``candidates`` with their device
    code in shared compiler runs (:func:`tilesearch.builder.batch.compile_batch`); per candidate,
    the seconds it took, those in compiler processes, and its error, if it failed."""
    from tilesearch.builder.batch import compile_batch

    def build(candidate: Candidate) -> Any:
        op = candidate.load_op()
        return lambda: candidate.build(op)

    with _timed_subprocesses() as tools:
        outcomes = compile_batch([build(c) for c in candidates])
    # compiler processes outside the shared runs (host code, a code compiled alone) are shared
    # out among the candidates built
    built = [error is None for _, _, error in outcomes]
    extra = max(0.0, tools[0] - sum(t for _, t, _ in outcomes)) / max(1, sum(built))
    return [(total, own + extra * ok, error) for (total, own, error), ok in zip(outcomes, built)]


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


def warm_up(arch: str = "sm_90a") -> None:
    """Runs in a worker process of the compile pool when it starts: imports TileLang, and with NVRTC
    chosen makes its precompiled header for ``arch``, so the first compile pays for neither."""
    from tilesearch.tilelang_import import import_tilelang

    import_tilelang()  # without ml_dtypes (see there)

    compiler.warm_up(arch)


# The compile pool yields the CPU to the measuring worker and the tuning process. A measuring
# worker queues its timed rounds from Python, and with the pool's 15 workers and their nvcc runs
# on the host's 16 cores it queued them at about 0.4 ms a round where the GPU ran one in under
# 0.1 ms (the partial 1024^3 recording on the H200, 2026-11-26). Rounds that catch the GPU
# waiting for the host time the wait (see tilesearch.runner.measure._Hold).
COMPILE_NICE = 10
MAX_BATCH = 16  # at most, per worker: on one CPU core 16 compiled 2.23x as fast as alone, 8 2.15x (RESULTS.md)


# what the process the compile pool's workers are forked from imports before its first fork
WARM_MODULES = ["tilesearch.builder.warm"]


def start_early() -> None:
    """Starts the process the compile pool forks from, so that it imports TileLang (and makes
    NVRTC's header) while the tuning process is still importing, opening its storage and starting
    the measuring worker. Its import and header took until 6.75 s into README's main command on the
    H200 host, started at 1.3 s with the pool (``scripts/timeline_probe.py``, 2026-12-04), and the
    first kernel was compiled 1.3 s after that: the first measured trial waited on it. ``tune``
    calls this once its input is checked, where it will compile here (not before: a command that
    fails on its input starts no process); the command line calls it sooner, once the storage's URL
    and file are checked and before the storage opens (``cmd_tune``)."""
    preload(WARM_MODULES)
    start_fork_server()


def usable_cores() -> int:
    """The cores this process may run on: its affinity (``taskset``, a container's or Slurm's CPU
    set), not the host's count, or a 16-core share of a 64-core host starts 63 compile workers."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 2


def default_workers() -> int:
    return max(1, usable_cores() - 1)


class LocalBuilder(Builder):
    """Compiles in ``workers`` processes on this machine, each call limited to ``timeout`` s.

    The processes start at once in the background, forked from one that has imported TileLang
    (:mod:`tilesearch.builder.warm`), so that they are ready by the time the first candidates come
    (``tune`` creates its builder before starting the runner).

    Args:
        workers: worker processes in the compile pool (default: all cores but one).
        timeout: seconds one compilation may take before its worker is killed and restarted.
        batch: the most candidates one worker compiles together while candidates queue up (see
            the module docstring); 1 compiles each alone, as does NVRTC
            (:mod:`tilesearch.builder.compiler`), which keeps the headers parsed between kernels.
        arch: the architecture the candidates will target, for NVRTC's precompiled header made
            as the workers start (the target's GPU is not known yet then; another arch's
            candidates only miss that head start).
    """

    def __init__(self, workers: int | None = None, timeout: float = 300.0, batch: int = MAX_BATCH,
                 arch: str = "sm_90a") -> None:
        self.workers = workers or default_workers()
        self.arch = arch
        self.timeout = timeout
        self.batch = 1 if compiler.chosen() == "nvrtc" else max(1, batch)
        self._waiting: deque[tuple[Candidate, Future[BuildResult]]] = deque()
        self._lock = threading.Lock()
        # builders never touch a GPU: compiling for an explicit target needs none
        env = {"CUDA_VISIBLE_DEVICES": ""}
        self._idle: queue.Queue[IsolatedWorker] = queue.Queue()
        preload(WARM_MODULES)
        self._all = [IsolatedWorker(env=env, name=f"builder-{i}", nice=COMPILE_NICE, forked=True)
                     for i in range(self.workers)]
        for worker in self._all:
            self._idle.put(worker)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="build")
        for _ in self._all:
            self._pool.submit(self._warm)

    def submit(self, candidate: Candidate) -> Future[BuildResult]:
        future: Future[BuildResult] = Future()
        with self._lock:
            self._waiting.append((candidate, future))
        self._pool.submit(self._next)
        return future

    def _next(self) -> None:
        """On an idle worker: the next candidates waiting, one or a batch (their share of the
        queue among the workers, at most ``batch``), compiled."""
        worker = self._idle.get()
        try:
            with self._lock:
                take = min(self.batch, len(self._waiting), math.ceil(len(self._waiting) / self.workers))
                jobs = [self._waiting.popleft() for _ in range(take)]
            jobs = [(c, f) for c, f in jobs if f.set_running_or_notify_cancel()]
            if len(jobs) > 1:
                results = self._together(worker, [c for c, _ in jobs])
            else:
                results = [self._alone(worker, c) for c, _ in jobs]
            for (_, future), result in zip(jobs, results):
                future.set_result(result)
        finally:
            self._idle.put(worker)

    def _alone(self, worker: IsolatedWorker, candidate: Candidate) -> BuildResult:
        start = time.perf_counter()
        result = worker.call("tilesearch.builder.local:compile_candidate", candidate, timeout=self.timeout)
        if result.ok:
            total, tools = result.value
            return BuildResult(candidate, ok=True, compile_s=float(total), tools_s=float(tools))
        return BuildResult(candidate, ok=False, error=result.error or "unknown error",
                           compile_s=time.perf_counter() - start, timed_out=result.timed_out)

    def _together(self, worker: IsolatedWorker, candidates: list[Candidate]) -> list[BuildResult]:
        # a batch of 16 took 25 s on one CPU core where each alone took 3 s: the single limit,
        # stretched by half of it per further eight candidates, not by each one's (a hang would hold
        # the whole batch for that long before its candidates go again alone)
        result = worker.call("tilesearch.builder.local:compile_candidates", candidates,
                             timeout=self.timeout * (1 + len(candidates) / 16))
        if not result.ok:  # the batch as a whole: each again alone, so that a failure is its own
            return [self._alone(worker, c) for c in candidates]
        return [BuildResult(c, ok=error is None, error=error, compile_s=float(total), tools_s=float(tools))
                for c, (total, tools, error) in zip(candidates, result.value)]

    def _warm(self) -> None:
        worker = self._idle.get()
        try:
            # a failure shows at compile time
            worker.call("tilesearch.builder.local:warm_up", self.arch, timeout=self.timeout)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting), deque()
        for _, future in waiting:
            future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for worker in self._all:
            worker.refuse_starts()  # a warm-up not begun yet starts no fork server again
        # none forked yet: the fork server is still importing TileLang (seconds), and each worker's
        # start waits for it; stopped, they fail at once (tune on a machine without a GPU said so
        # after 6-10 s, most of it this wait)
        unforked = not any(worker.pid is not None for worker in self._all)  # (no lock: a start holds it)
        with no_fork_server() if unforked else nullcontext():
            IsolatedWorker.close_all(self._all)
