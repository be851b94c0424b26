"""Measures on a local CUDA GPU inside an isolated worker process.

A kernel that crashes the CUDA context (illegal address) or kills the process is a
``runtime_error``; one that hangs is a ``run_timeout``. Either way the worker is restarted with a
fresh context and the search goes on.

**Spare workers.** The final re-time runs in fresh worker processes (no kernel run in them yet:
another memory placement, another context; :mod:`tilesearch.runner.pool`), and starting one
(importing torch and TileLang, making a CUDA context) took 5-9 s on the H100 host, paid once per
process while the GPU sat idle: most of the 20 s that the re-time of two processes took. So when
``tune`` says a re-time will follow (:meth:`LocalRunner.expect_retime`), the runner starts
``final_processes`` spare workers in the background, each warming up in a thread of its own, and
:meth:`LocalRunner.retime` finds them ready and only times. ``tune`` says so once the measuring
worker is up and the study open: not sooner, since starting them beside the measuring worker
would slow its own start, on the way to the first result; then they warm up while the first
configurations compile, when the GPU has little to time. A spare that is ready also replaces the
measuring worker after a crash or a hang, and is replaced in turn while a re-time is to come. Spares are stopped by :meth:`LocalRunner.close`, on
every way out of ``tune`` (an error, Ctrl-C, SIGTERM); a spare used by a re-time is stopped
right after it, so the next problem of a shared runner (a range's next size) gets new ones.

**A quick start.** The search needs the GPU's facts (arch, SMs, shared memory, versions) before it
can propose and compile anything, and the measuring worker needs TileLang only when the first
kernel is built. So :meth:`LocalRunner.start` asks the worker for the facts alone (torch and a
CUDA context) and lets it import TileLang in the background (``warm_fn``) while the first
configurations are proposed and compiled; the first call that times waits for that import. On
the H100 host that import took 1.3-1.5 s of a start of 7-8 s (RESULTS.md, fast-tuning issue).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tilesearch.records import Candidate, Incumbent, RunResult, Status
from tilesearch.runner.base import NoDeviceError, Runner
from tilesearch.runner.measure import FINAL_RESETTLE_MS, RESETTLE_WITHIN_S, MeasureSettings
from tilesearch.runner.peer import Peer
from tilesearch.runner.pool import MAX_PROCESSES, disagree, pool
from tilesearch.target import Target
from tilesearch.workers import CallResult, IsolatedWorker, resolve

_CONTEXT_LOST = re.compile(r"CUDA|cuda|illegal|device-side|launch failure|AcceleratorError", re.S)
WARM_UP_TIMEOUT = 120.0  # seconds a worker process may take to import and make its CUDA context
QUICK_START_ENV = "TILESEARCH_QUICK_START"  # 0: the GPU's facts come from the started worker, not the driver


class DeviceMismatchError(NoDeviceError):
    """The measuring worker reports other GPU facts than the driver gave at the quick start."""


def visible_device(device: int) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` entry for a worker measuring on ``device``, an index among the
    devices this process sees: ``CUDA_VISIBLE_DEVICES=2 tilesearch tune ...`` measures on GPU 2,
    as CUDA numbers it, not on GPU 0 (a worker's own setting replaces the one it inherits)."""
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if seen is None or not seen.strip():
        return str(device)
    ids = [d.strip() for d in seen.split(",") if d.strip()]
    if not 0 <= device < len(ids):
        raise NoDeviceError(f"device {device} is not among the {len(ids)} that CUDA_VISIBLE_DEVICES={seen} leaves visible; "
                            f"pass device=0..{len(ids) - 1} or change CUDA_VISIBLE_DEVICES")
    return ids[device]


def _failed_retime(call: CallResult, count: int) -> list[RunResult]:
    """``count`` results of a re-time whose process failed ``call``: each that failure."""
    status = Status.RUN_TIMEOUT if call.timed_out else Status.RUNTIME_ERROR
    return [RunResult(status, error=f"re-time: {call.error}") for _ in range(count)]


class LocalRunner(Runner):
    """Runs candidates on one GPU of this machine.

    Args:
        device: CUDA device index among the devices this process sees (the worker sees only
            that device; see :func:`visible_device`).
        timeout: seconds one check-and-time may take before the worker is killed.
        settings: measurement method.
        recycle_after: restart the worker after this many candidates (bounds leaks); 0 never.

    ``measure_fn``, ``info_fn`` (the start of a worker: facts after warm-up), ``facts_fn`` and
    ``warm_fn`` (the same in two steps, for :meth:`start`) name what the worker runs (import
    paths): a subclass may measure another way, e.g. :class:`tilesearch.testing.cpu.CpuRunner`.
    ``driver_fn`` names what reads the facts in the tuning process before the worker has started,
    given the worker's environment (``None``: the worker reports them first), and ``absent_fn``
    what says, where those facts cannot be read, that there is surely no GPU.
    """

    measure_fn = "tilesearch.runner.measure:measure"
    together_fn = "tilesearch.runner.measure:measure_together"
    prepare_fn: str | None = "tilesearch.runner.measure:prepare_together"
    info_fn = "tilesearch.runner.measure:device_info"
    facts_fn = "tilesearch.runner.measure:device_facts"
    warm_fn = "tilesearch.runner.measure:warm_up"
    driver_fn: str | None = "tilesearch.runner.driver:facts"
    absent_fn: str | None = "tilesearch.runner.driver:absent"

    def __init__(
        self,
        device: int = 0,
        timeout: float = 60.0,
        settings: MeasureSettings | None = None,
        recycle_after: int = 200,
    ) -> None:
        self.timeout = timeout
        self.settings = settings or MeasureSettings()
        self.recycle_after = recycle_after
        self.env = {"CUDA_VISIBLE_DEVICES": visible_device(device)}  # of every worker process it starts
        self._name = f"runner-gpu{device}"
        self._worker = IsolatedWorker(env=self.env, name=self._name)
        self._since_start = 0
        self._versions: dict[str, str] = {}
        self._spares: list[_Warming] = []
        self._warming: _Warming | None = None  # the measuring worker's background warm-up
        self._expected: dict[str, Any] | None = None  # the driver's facts, which that warm-up must confirm
        self._spares_wanted = 0  # while a re-time is to come: spares kept started
        self._started = 0
        self._spent: dict[str, float] = {}
        self._retired: list[IsolatedWorker] = []  # the final re-time's processes, asked to exit

    def start(self) -> Target:
        """The GPU's facts, read through the driver while the measuring worker starts in the
        background, or else from the worker, which then warms up in the background (see the
        module docstring)."""
        self._settle()
        if self.driver_fn is not None and not self._worker.alive and os.environ.get(QUICK_START_ENV, "1") != "0":
            # the worker's start (seconds of importing torch) begins first, beside the driver's read
            warming = _Warming(self._worker, self.info_fn)
            early = resolve(self.driver_fn)(self.env)
            if early is not None:
                info = dict(early)
                self._versions = info.pop("versions")
                self._expected, self._warming = early, warming
                return Target.from_dict(info)
            reason = resolve(self.absent_fn)(self.env) if self.absent_fn else None
            if reason:  # surely no GPU: said now, not after the worker's seconds of importing torch
                self._no_device(CallResult(False, error=reason))
            warming.wait()  # the driver could not say for sure: the worker does, once warmed up
            result, then = warming.result, None
        else:
            result, then = self._worker.call(self.facts_fn, timeout=WARM_UP_TIMEOUT), self.warm_fn
        if result is None or not result.ok:
            self._no_device(result)
        info = dict(result.value)
        self._versions = info.pop("versions")
        if then is not None:
            self._warming = _Warming(self._worker, then)
        return Target.from_dict(info)

    def _settle(self) -> None:
        """Waits for the measuring worker's background warm-up, if any: a worker answers one call
        at a time. After a quick start, the worker must report the driver's facts; else its
        failure is not raised here: the next call meets the same cause."""
        if self._warming is None:
            return
        warming, self._warming = self._warming, None
        warming.wait()
        self._add("worker: warm-up (background)", warming.warm_s)
        expected, self._expected = self._expected, None
        if expected is not None:
            self._top_up()  # spares asked for meanwhile start now, not beside the measuring worker's start
            got = warming.result
            if got is None or not got.ok:
                self._no_device(got)
            if got.value != expected:
                differ = sorted(k for k in {**expected, **got.value} if expected.get(k) != got.value.get(k))
                raise DeviceMismatchError(
                    f"the measuring worker's GPU facts differ from the driver's in {', '.join(differ)} "
                    f"(worker {({k: got.value.get(k) for k in differ})}, driver {({k: expected.get(k) for k in differ})}); "
                    f"set {QUICK_START_ENV}=0 to take them from the worker")

    def _no_device(self, result: CallResult | None) -> None:
        """Stops the measuring worker, whose start failed or is not wanted, and says why there is
        no GPU. Closed for good, since a warm-up in its thread may not have started it yet and would
        start it afterwards; a fresh worker takes its place for a later start."""
        self._worker.close(kill=True)
        self._worker = IsolatedWorker(env=self.env, name=self._name)
        reason = (result.error or "").strip().splitlines()[0] if result is not None and result.error else "unknown"
        raise NoDeviceError(f"no CUDA GPU to measure on ({reason})")

    @property
    def versions(self) -> dict[str, str]:
        return self._versions

    def run(self, candidate: Candidate, incumbent: Incumbent | None = None) -> RunResult:
        self._settle()
        if self.recycle_after and self._since_start >= self.recycle_after:
            self._fresh_worker()
        self._since_start += 1
        result = self._worker.call(self.measure_fn, candidate, self.settings, incumbent, timeout=self.timeout)
        if result.ok:
            return result.value
        if result.timed_out:
            self._fresh_worker(restarted=True)
            return RunResult(Status.RUN_TIMEOUT, error=result.error)
        if result.died or _CONTEXT_LOST.search(result.error or ""):
            self._fresh_worker(restarted=result.died)
        return RunResult(Status.RUNTIME_ERROR, error=result.error)

    def expect_retime(self) -> None:
        """Starts spare workers in the background, up to ``settings.final_processes`` (see the
        module docstring), once the measuring worker has started."""
        self._spares_wanted = self.settings.final_processes
        if self._expected is None:  # else when the measuring worker is up (_settle)
            self._top_up()

    def retime(self, candidates: Sequence[Candidate], peers: Sequence[Peer] = ()) -> list[RunResult]:
        """All ``candidates``, the ``peers`` and the baseline interleaved in the same rounds, in a
        fresh worker (no state left from the search: allocations, a clock pattern, a leaked
        context), and that again in ``settings.final_processes`` fresh workers, more while they
        disagree on the best of several (:func:`~tilesearch.runner.pool.disagree`), each on
        inputs of its own seed, their rounds pooled (:mod:`tilesearch.runner.pool`). The fresh
        workers are the spares started by :meth:`expect_retime` where they are ready (else they
        are started now), the first ``final_processes`` loaded and checked side by side before any
        times (:meth:`_prepared`), and each is stopped once it has timed. A peer's maker may tune
        first (an autotuner), so each adds to the timeout."""
        self._spares_wanted = 0  # none started while the rounds are timed; the next problem asks again
        self._settle()
        if not candidates:
            return []
        if self._worker.alive:  # it stays for the next problem; the memory its allocator holds goes back
            self._worker.call("torch.cuda:empty_cache", timeout=self.timeout)
        processes: list[list[RunResult]] = []
        ended = 0.0
        # one configuration and no peer: more processes cannot change a choice, only narrow its
        # interval, and the pooled interval already spans processes that disagree (a nested
        # bootstrap over them). On the H100 three of five runs of README's main command re-timed
        # their one configuration in four processes, 14-16.5 s against 4.7-5.2 s in two (709aac8).
        alone = len(candidates) == 1 and not peers
        # a peer may tune first (an autotuner), which another process's rounds must not disturb
        prepared, failed = self._prepared(candidates) if self.prepare_fn is not None and not peers else ([], None)
        if failed is not None:
            return failed
        try:
            while len(processes) < MAX_PROCESSES:
                if len(processes) >= self.settings.final_processes:  # they disagreed: see _top_up
                    self._top_up(MAX_PROCESSES - len(processes))
                settings = replace(self.settings, seed=self.settings.seed + len(processes))
                worker = prepared.pop(0) if prepared else self._take_fresh()
                began = time.perf_counter()
                if processes and began - ended < RESETTLE_WITHIN_S:  # the GPU comes from the previous rounds
                    settings = replace(settings, settle_ms=min(settings.settle_ms, FINAL_RESETTLE_MS))
                try:
                    result = worker.call(self.together_fn, list(candidates), settings, list(peers),
                                         timeout=self.timeout * (len(candidates) + 1) + 600 * len(peers))
                except BaseException:  # Ctrl-C, SIGTERM: it is no spare any more, so close() would not stop it
                    worker.close(kill=True)
                    raise
                ended = time.perf_counter()
                self._add("final: process", ended - began)
                spent = next((r.extra["phases"] for r in result.value if "phases" in r.extra), {}) if result.ok else {}
                for phase, seconds in spent.items():
                    self._add(f"final: {phase}", seconds)
                self._retire(worker)
                if not result.ok:
                    return _failed_retime(result, len(candidates) + len(peers))
                processes.append(result.value)
                if len(processes) >= self.settings.final_processes and (alone or not disagree(processes)):
                    break
        except BaseException:  # Ctrl-C, SIGTERM: the prepared ones left are no spares, so close() would not stop them
            for worker in prepared:
                worker.close(kill=True)
            raise
        finally:  # an early return: the prepared ones left exit as a used one does
            for worker in prepared:
                self._retire(worker)
        return pool(processes, self.settings.seed, self.settings.drift)

    def _prepared(self, candidates: Sequence[Candidate]) -> tuple[list[IsolatedWorker], list[RunResult] | None]:
        """The re-time's first ``final_processes`` fresh workers, each with ``candidates`` loaded
        and checked on the inputs of its own seed (``prepare_fn``), side by side; where one failed
        to, none, and the re-time's results (each the failure).

        Why: each process loaded and checked its candidates as it began, 0.6-0.7 s on the H100
        host at 8192^3 (twice in README's main command), while the GPU timed nothing. Side by side
        before any process times, the loads overlap each other, and the later process begins its
        rounds right as the earlier ends (its shorter settle: :data:`FINAL_RESETTLE_MS`). Nothing
        is timed while they load: a check's GPU work would disturb another process's rounds."""
        workers = [self._take_fresh() for _ in range(self.settings.final_processes)]
        outcomes: list[CallResult | None] = [None] * len(workers)

        def prepare(i: int) -> None:
            settings = replace(self.settings, seed=self.settings.seed + i)
            outcomes[i] = workers[i].call(self.prepare_fn, list(candidates), settings,  # type: ignore[arg-type]
                                          timeout=self.timeout * (len(candidates) + 1))

        began = time.perf_counter()
        threads = [threading.Thread(target=prepare, args=(i,), daemon=True) for i in range(1, len(workers))]
        try:
            for thread in threads:
                thread.start()
            prepare(0)
            for thread in threads:
                thread.join()
        except BaseException:  # Ctrl-C, SIGTERM: no spares any more, so close() would not stop them
            for worker in workers:
                worker.close(kill=True)
            raise
        self._add("final: prepare (side by side)", time.perf_counter() - began)
        answered = [r if r is not None else CallResult(False, error="a process was not prepared") for r in outcomes]
        failed = next((r for r in answered if not r.ok), None)
        if failed is not None:
            for worker in workers:
                self._retire(worker)
            return [], _failed_retime(failed, len(candidates))
        for outcome in answered:
            for phase, seconds in (outcome.value or {}).items():
                self._add(f"final: {phase}", seconds)
        return workers, None

    def _retire(self, worker: IsolatedWorker) -> None:
        """Asks a re-time's process to exit, not waiting for it: its exit (a CUDA context torn
        down) overlaps the next process's start and settle instead of delaying it; close() joins it."""
        worker.ask_to_stop()
        self._retired.append(worker)

    def phases(self) -> dict[str, float]:
        spent, self._spent = self._spent, {}
        return spent

    def _spare(self) -> _Warming:
        self._started += 1
        return _Warming(IsolatedWorker(env=self.env, name=f"{self._name}-spare{self._started}"), self.info_fn)

    def _top_up(self, wanted: int | None = None) -> None:
        """Starts spares, side by side, until ``wanted`` are there (by default as many as a re-time
        to come wants). Once the re-time's processes disagree, every process it may still add starts
        at once: one after another, each start (6 s on the H100 host, most of it importing torch)
        came between two processes while the GPU sat idle, and a re-time of 4 processes took 20 s of
        README's main command against 5 s for 2. Nothing is timed while they start."""
        while len(self._spares) < (self._spares_wanted if wanted is None else wanted):
            self._spares.append(self._spare())

    def _take_fresh(self) -> IsolatedWorker:
        """A fresh worker process, warmed up: the first spare that warmed up well (waiting for it
        if it is still warming up), else one started now."""
        while self._spares:
            spare = self._spares[0]  # taken out once ready: close() stops it if a signal comes meanwhile
            waited = time.perf_counter()
            ok = spare.wait()
            self._add("spare: wait", time.perf_counter() - waited)
            self._add("spare: warm-up (background)", spare.warm_s)
            self._spares.pop(0)
            if ok:
                return spare.worker
            spare.worker.close(kill=True)
        self._started += 1
        worker = IsolatedWorker(env=self.env, name=f"{self._name}-fresh{self._started}")
        try:
            worker.call(self.info_fn, timeout=WARM_UP_TIMEOUT)  # outside the re-time's timeout, as a spare's
        except BaseException:
            worker.close(kill=True)
            raise
        return worker

    def _fresh_worker(self, restarted: bool = False) -> None:
        """A new worker, warmed up (imports, CUDA context) outside the next candidate's timeout:
        otherwise the candidate measured after a hang or a crash pays the restart and may time out.
        A spare that is ready takes the place (and is replaced while a re-time is to come)."""
        self._settle()
        ready = next((s for s in self._spares if s.ready), None)
        if ready is not None:
            self._spares.remove(ready)
            self._add("spare: warm-up (background)", ready.warm_s)
            self._worker.close(kill=True)  # the old one, or the one it restarted as
            self._worker = ready.worker
            self._since_start = 0
            self._top_up()
            return
        if not restarted:  # the worker restarts itself after a timeout or its death
            self._worker.restart()
        self._worker.call(self.info_fn, timeout=WARM_UP_TIMEOUT)
        self._since_start = 0

    def _add(self, phase: str, seconds: float) -> None:
        self._spent[phase] = self._spent.get(phase, 0.0) + seconds

    @property
    def worker_pid(self) -> int | None:
        """PID of the measuring worker process (it changes when the worker is restarted)."""
        return self._worker.pid

    @property
    def spare_pids(self) -> list[int]:
        """PIDs of the spare worker processes started and not yet used or stopped."""
        return [s.worker.pid for s in self._spares if s.worker.pid is not None]

    def call(self, path: str, *args: Any, timeout: float = 60.0) -> Any:
        """Runs ``path(*args)`` inside the measuring worker (e.g. a memory probe); raises on error."""
        self._settle()
        result = self._worker.call(path, *args, timeout=timeout)
        if not result.ok:
            raise RuntimeError(f"{path} failed in the runner's worker: {result.error}")
        return result.value

    def close(self) -> None:
        self._spares_wanted = 0
        spares, self._spares = self._spares, []
        if self._warming is not None:  # its call ends first: stopping the worker under it would restart it
            self._warming.join(WARM_UP_TIMEOUT / 12)
            if self._warming.running:
                self._worker.close(kill=True)
                self._warming.join()
            self._warming = None
        for spare in spares:  # a spare holds nothing worth a clean exit: stopped at once
            spare.worker.close(kill=True)
        self._worker.close()  # for good: a measurement still running in the tuning thread must not restart it
        retired, self._retired = self._retired, []
        IsolatedWorker.close_all(retired)
        for spare in spares:
            spare.join()


class _Warming:
    """A worker process warming up (imports, CUDA context) in a thread of its own: a spare, or
    the measuring worker after :meth:`LocalRunner.start`."""

    def __init__(self, worker: IsolatedWorker, info_fn: str) -> None:
        self.worker = worker
        self.warm_s = 0.0
        self._result: CallResult | None = None
        self._thread = threading.Thread(target=self._warm_up, args=(info_fn,), name=f"{worker.name}-warm-up",
                                         daemon=True)
        self._thread.start()

    def _warm_up(self, info_fn: str) -> None:
        began = time.perf_counter()
        try:
            self._result = self.worker.call(info_fn, timeout=WARM_UP_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - closed while warming up (the runner is closing): data, no traceback
            self._result = CallResult(False, error=f"{type(exc).__name__}: {exc}")
        self.warm_s = time.perf_counter() - began

    @property
    def result(self) -> CallResult | None:
        """The warm-up call's result, once it ended."""
        return None if self._thread.is_alive() else self._result

    @property
    def ready(self) -> bool:
        """Warmed up, and well."""
        return not self._thread.is_alive() and self._result is not None and self._result.ok

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self) -> bool:
        """Waits for the warm-up to end; whether it went well."""
        self._thread.join()
        return self.ready

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)
