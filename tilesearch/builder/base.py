"""The builder interface: compile candidates, return :class:`~tilesearch.records.BuildResult`s."""

from __future__ import annotations

import abc
from concurrent.futures import Future

from tilesearch.records import BuildResult, Candidate


class Builder(abc.ABC):
    """Compiles candidates, possibly many at once. ``submit`` never raises for a bad candidate:
    a failed or timed-out compile is a ``BuildResult`` with ``ok=False`` and the error."""

    workers: int = 1
    batch: int = 1  # candidates one worker compiles together at most, while they queue up

    @abc.abstractmethod
    def submit(self, candidate: Candidate) -> Future[BuildResult]:
        """Starts compiling ``candidate``; the future resolves to its build result."""

    def close(self) -> None:
        """Stops worker processes (no-op by default)."""

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullBuilder(Builder):
    """Compiles nothing: for runners that need no binary (replayed measurements)."""

    def submit(self, candidate: Candidate) -> Future[BuildResult]:
        future: Future[BuildResult] = Future()
        future.set_result(BuildResult(candidate, ok=True))
        return future
