"""Measures on a local CUDA GPU inside an isolated worker process.

A kernel that crashes the CUDA context (illegal address) or kills the process is a
``runtime_error``; one that hangs is a ``run_timeout``. Either way the worker is restarted with a
fresh context and the search goes on.
"""

from __future__ import annotations

import re

from tilesearch.records import Candidate, RunResult, Status
from tilesearch.runner.base import NoDeviceError, Runner
from tilesearch.runner.measure import MeasureSettings
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
    """

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
        result = self._worker.call("tilesearch.runner.measure:device_info", timeout=120)
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

    def run(self, candidate: Candidate) -> RunResult:
        if self.recycle_after and self._since_start >= self.recycle_after:
            self._worker.restart()
            self._since_start = 0
        self._since_start += 1
        result = self._worker.call(
            "tilesearch.runner.measure:measure", candidate, self.settings, timeout=self.timeout
        )
        if result.ok:
            return result.value
        if result.timed_out:
            self._since_start = 0
            return RunResult(Status.RUN_TIMEOUT, error=result.error)
        if result.died or _CONTEXT_LOST.search(result.error or ""):
            self._worker.restart()
            self._since_start = 0
        return RunResult(Status.RUNTIME_ERROR, error=result.error)

    def close(self) -> None:
        self._worker.stop()
