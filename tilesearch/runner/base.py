"""The runner interface: check and time built candidates, return :class:`RunResult`s."""

from __future__ import annotations

import abc

from tilesearch.op import Problem
from tilesearch.records import Candidate, RunResult
from tilesearch.space import Space
from tilesearch.target import Target


class NoDeviceError(RuntimeError):
    """The runner has no device to measure on."""


class Runner(abc.ABC):
    """Measures candidates one at a time. Call order: :meth:`start` once (it returns the target
    measured on), :meth:`prepare` once, then :meth:`run` per built candidate, then :meth:`close`.
    ``run`` never raises for a bad kernel: crashes, hangs and wrong results come back as a
    ``RunResult`` status."""

    replayed: bool = False

    @abc.abstractmethod
    def start(self) -> Target:
        """Starts the device worker; raises :class:`NoDeviceError` if there is no device."""

    def prepare(self, problem: Problem, space: Space) -> Space:
        """Called once after :meth:`start`: the space to search for ``problem`` (``space``, unless
        the runner can measure only part of it, as a replay runner can)."""
        return space

    @abc.abstractmethod
    def run(self, candidate: Candidate) -> RunResult:
        """Checks and times one candidate that the builder compiled."""

    def close(self) -> None:
        """Stops worker processes (no-op by default)."""

    @property
    def versions(self) -> dict[str, str]:
        """Software versions on the measuring side."""
        return {}
