"""A runner that invents latencies from a formula, for tests of the tuning loop without a GPU.

Its numbers are not measurements: every result it returns says ``synthetic`` in ``extra`` and
the runner reports itself as replayed, so nothing it produces can pass for a measurement.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from tilesearch.records import Candidate, RunResult, Status
from tilesearch.runner.base import Runner
from tilesearch.space import digest
from tilesearch.target import Target


def default_latency(config: dict[str, Any]) -> float:
    """A smooth made-up cost with a unique optimum and a little hash noise."""
    cost = 1.0
    for name, value in sorted(config.items()):
        if isinstance(value, int) and value > 0:
            cost += 0.1 * (math.log2(value) - 6) ** 2
        else:
            cost += 0.05 * (int(digest(name, value), 16) % 3)
    return cost + (int(digest(config), 16) % 1000) / 1e5


class SyntheticRunner(Runner):
    """Returns ``latency(config)`` for each candidate; counts the candidates it was asked about.

    Args:
        latency: config -> milliseconds; return ``None`` to report a wrong result.
        target: what :meth:`start` reports.
        delay: seconds each run takes (to widen races between processes in tests).
        log: a file that gets one line per run, ``<key> <pid>``, appended atomically, so that
            tests can count what several processes measured.
    """

    replayed = True

    def __init__(
        self,
        latency: Callable[[dict[str, Any]], float | None] = default_latency,
        target: Target | None = None,
        delay: float = 0.0,
        log: str | None = None,
    ) -> None:
        self.latency = latency
        self.target = target or Target.from_arch("sm_90a", gpu="synthetic")
        self.delay = delay
        self.log = log
        self.calls: list[Candidate] = []

    def start(self) -> Target:
        return self.target

    def run(self, candidate: Candidate) -> RunResult:
        self.calls.append(candidate)
        if self.log:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{candidate.key} {os.getpid()}\n".encode())
            finally:
                os.close(fd)
        if self.delay:
            time.sleep(self.delay)
        ms = self.latency(candidate.config)
        if ms is None:
            return RunResult(Status.WRONG_RESULT, error="synthetic wrong result", replayed=True)
        return RunResult(Status.OK, latency_ms=ms, tflops=1.0 / ms, replayed=True, extra={"synthetic": True})
