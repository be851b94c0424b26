"""Measures on a local CUDA GPU inside an isolated worker process.

A kernel that crashes the CUDA context (illegal address) or kills the process is a
``runtime_error``; one that hangs is a ``run_timeout``. Either way the worker is restarted with a
fresh context and the search goes on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tilesearch.records import Candidate, Incumbent, RunResult, Status
from tilesearch.runner.base import NoDeviceError, Runner
from tilesearch.runner.measure import MeasureSettings
from tilesearch.runner.peer import Peer
from tilesearch.runner.pool import MAX_PROCESSES, disagree, pool
from tilesearch.target import Target
from tilesearch.workers import IsolatedWorker

_CONTEXT_LOST = re.compile(r"CUDA|cuda|illegal|device-side|launch failure|AcceleratorError", re.S)


class LocalRunner(Runner):
    """Runs candidates on one GPU of this machine.

    Args:
        device: CUDA device index (the worker sees only that device).
        timeout: seconds one check-and-time may take before the worker is killed.
        settings: measurement method.
        recycle_after: restart the worker after this many candidates (bounds leaks); 0 never.

    ``measure_fn`` and ``info_fn`` name what the worker runs (import paths): a subclass may
    measure another way, e.g. :class:`tilesearch.testing.cpu.CpuRunner`.
    """

    measure_fn = "tilesearch.runner.measure:measure"
    together_fn = "tilesearch.runner.measure:measure_together"
    info_fn = "tilesearch.runner.measure:device_info"

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
        self._worker = IsolatedWorker(env={"CUDA_VISIBLE_DEVICES": str(device)}, name=f"runner-gpu{device}")
        self._since_start = 0
        self._versions: dict[str, str] = {}

    def start(self) -> Target:
        result = self._worker.call(self.info_fn, timeout=120)
        if not result.ok:
            self._worker.stop(kill=True)
            reason = (result.error or "").strip().splitlines()[0] if result.error else "unknown"
            raise NoDeviceError(f"no CUDA GPU to measure on ({reason})")
        info = dict(result.value)
        self._versions = info.pop("versions")
        return Target.from_dict(info)

    @property
    def versions(self) -> dict[str, str]:
        return self._versions

    def run(self, candidate: Candidate, incumbent: Incumbent | None = None) -> RunResult:
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

    def retime(self, candidates: Sequence[Candidate], peers: Sequence[Peer] = ()) -> list[RunResult]:
        """All ``candidates``, the ``peers`` and the baseline interleaved in the same rounds, in a
        fresh worker (no state left from the search: allocations, a clock pattern, a leaked
        context), and that again in ``settings.final_processes`` fresh workers or more, each on
        inputs of its own seed, their rounds pooled (:mod:`tilesearch.runner.pool`). A peer's
        maker may tune first (an autotuner), so each adds to the timeout."""
        if not candidates:
            return []
        processes: list[list[RunResult]] = []
        while len(processes) < MAX_PROCESSES:
            settings = replace(self.settings, seed=self.settings.seed + len(processes))
            self._fresh_worker()
            result = self._worker.call(self.together_fn, list(candidates), settings, list(peers),
                                       timeout=self.timeout * (len(candidates) + 1) + 600 * len(peers))
            if not result.ok:
                self._fresh_worker(restarted=result.timed_out or result.died)
                status = Status.RUN_TIMEOUT if result.timed_out else Status.RUNTIME_ERROR
                return [RunResult(status, error=f"re-time: {result.error}") for _ in [*candidates, *peers]]
            processes.append(result.value)
            if len(processes) >= self.settings.final_processes and not disagree(processes):
                break
        return pool(processes, self.settings.seed)

    def _fresh_worker(self, restarted: bool = False) -> None:
        """A new worker, warmed up (imports, CUDA context) outside the next candidate's timeout:
        otherwise the candidate measured after a hang or a crash pays the restart and may time out."""
        if not restarted:  # the worker restarts itself after a timeout or its death
            self._worker.restart()
        self._worker.call(self.info_fn, timeout=120)
        self._since_start = 0

    @property
    def worker_pid(self) -> int | None:
        """PID of the measuring worker process (it changes when the worker is restarted)."""
        return self._worker.pid

    def call(self, path: str, *args: Any, timeout: float = 60.0) -> Any:
        """Runs ``path(*args)`` inside the measuring worker (e.g. a memory probe); raises on error."""
        result = self._worker.call(path, *args, timeout=timeout)
        if not result.ok:
            raise RuntimeError(f"{path} failed in the runner's worker: {result.error}")
        return result.value

    def close(self) -> None:
        self._worker.stop()
