"""The measuring thread of a tuning loop: it takes each kernel as it compiles and measures it,
one after another, whatever the tuning process is doing meanwhile.

Why a thread that feeds itself: the tuning process handed the runner its next kernel only once it
had collected the last result, and between the two it recorded that result and proposed and
launched the next ones (about 90 ms of database writes a trial), where a trial stopped early by
racing (:mod:`tilesearch.runner.measure`) is timed in about 0.1 s. Measured on the H200 host, that
was not what held the GPU back in README's main command: the runner was busy 71-73% after the first
result with this thread and 70-72% without it, waiting on builds either way (RESULTS.md, "A warm
compile pool"). The thread stays because what the GPU does no longer depends on how long the
tuning process's writes take (a slow storage, a database server, a strategy that proposes slowly).

Order: of the kernels compiled and waiting, the one launched first (its build's sequence number);
one that compiles while the thread is idle is measured at once. Each is raced against the best
measured so far, in measuring order (:class:`~tilesearch.records.Incumbent`). What comes back
(:attr:`Feed.arrivals`) is in measuring order; the tuning loop records it in launch order (but for
a trial still compiling after ``tuner.PATIENCE`` s).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

from tilesearch.records import BuildResult, Incumbent, RunResult
from tilesearch.runner.base import Runner


@dataclass(frozen=True)
class Arrival:
    """A launched build's outcome: its build, and the runner's result with the measurement's start
    and end (``time.perf_counter``), or ``None`` for a build that failed."""

    future: Future[BuildResult]
    build: BuildResult
    run: RunResult | None = None
    began: float = 0.0
    ended: float = 0.0


class Feed:
    """Measures the kernels of the builds it is given, in a thread of its own (see the module
    docstring), starting from the best result so far ``incumbent``.

    :attr:`arrivals` holds :class:`Arrival` items, or the exception the runner raised, after which
    the thread stops. :attr:`busy` is whether a kernel is being measured now.
    """

    def __init__(self, runner: Runner, incumbent: Incumbent) -> None:
        self.runner = runner
        self.incumbent = incumbent
        self.arrivals: queue.Queue[Arrival | BaseException] = queue.Queue()
        self.busy = False
        self._compiled: queue.PriorityQueue[tuple[int, Future[BuildResult] | None]] = queue.PriorityQueue()
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, future: Future[BuildResult]) -> None:
        """Measures ``future``'s kernel once it has compiled, before those added later."""
        number = next(self._numbers)
        future.add_done_callback(lambda done: self._compiled.put((number, done)))

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="tilesearch-measure", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ends the thread once its measurement in flight, if any, is over (waiting ``timeout`` s
        for it at most: a thread stuck in the runner is a daemon, and the runner's close ends it)."""
        if self._thread is not None:
            self._compiled.put((-1, None))
            self._thread.join(timeout)
            self._thread = None

    def _serve(self) -> None:
        while True:
            _, future = self._compiled.get()
            if future is None:
                return
            if future.cancelled():
                continue
            try:
                build = future.result()
            except BaseException as exc:  # noqa: BLE001 - handed to the tuning thread, which raises it
                self.arrivals.put(exc)
                return
            if not build.ok:
                self.arrivals.put(Arrival(future, build))
                continue
            self.busy = True
            began = time.perf_counter()
            try:
                run = self.runner.run(build.candidate, self.incumbent)
            except BaseException as exc:  # noqa: BLE001 - as above
                self.busy = False
                self.arrivals.put(exc)
                return
            ended = time.perf_counter()
            self.incumbent = self.incumbent.updated(run)  # before the next trial's race
            self.busy = False
            self.arrivals.put(Arrival(future, build, run, began, ended))
