"""The builder interface: compile candidates, return :class:`~tilesearch.records.BuildResult`s."""

from __future__ import annotations

import abc
from collections.abc import Sequence
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


def compile_ahead(builder: Builder, candidates: Sequence[Candidate]) -> list[BuildResult]:
    """Compiles ``candidates`` side by side in ``builder``'s pool and waits for them all, so that a
    step that compiles in one process (a final re-time's fresh workers, an export) then finds its
    kernels in TileLang's cache. On a fresh H100 host, a resumed range re-timed each tuned size's
    8 configurations after compiling them one after another in each re-time process: 37-71 s a
    size of nothing measured (2026-11-27); an export compiled its buckets' kernels one after
    another, about 70 s."""
    futures = [builder.submit(candidate) for candidate in candidates]
    return [future.result() for future in futures]
