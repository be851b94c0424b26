"""The runner interface: check and time built candidates, return :class:`RunResult`s."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from tilesearch.op import Problem
from tilesearch.records import Candidate, Incumbent, RunResult
from tilesearch.runner.peer import Peer, untimed
from tilesearch.space import Space
from tilesearch.target import Target


class NoDeviceError(RuntimeError):
    """The runner has no device to measure on."""


class Runner(abc.ABC):
    """Measures candidates one at a time. Call order: :meth:`start` once (it returns the target
    measured on), :meth:`prepare` once, :meth:`expect_retime` if a final :meth:`retime` will
    follow the search, then :meth:`run` per built candidate, with the search's best so far; then
    :meth:`retime`, :meth:`phases` and :meth:`close`. A runner shared by several
    problems (a range's sizes) goes through ``start`` to ``phases`` once per problem.
    ``run`` never raises for a bad kernel: crashes, hangs and wrong results come back as a
    ``RunResult`` status."""

    replayed: bool = False
    measured_by: str = ""
    """Where the figures come from when that is not this machine's device (a replay runner's
    dataset): part of a study's identity (:mod:`tilesearch.provenance`)."""

    @abc.abstractmethod
    def start(self) -> Target:
        """Starts the worker process on the device; raises :class:`NoDeviceError` if there is no device."""

    def prepare(self, problem: Problem, space: Space) -> Space:
        """Called once after :meth:`start`: the space to search for ``problem`` (``space``, unless
        the runner can measure only part of it, as a replay runner can)."""
        return space

    @abc.abstractmethod
    def run(self, candidate: Candidate, incumbent: Incumbent | None = None) -> RunResult:
        """Checks and times one candidate that the builder compiled. A runner may stop timing it
        once it is clearly slower than ``incumbent``, the search's best correct trial so far
        (:mod:`tilesearch.runner.measure`, "Racing"), and then says ``raced`` in ``extra``;
        one near or above it, or with no incumbent, is timed to the full precision."""

    def retime(self, candidates: Sequence[Candidate], peers: Sequence[Peer] = ()) -> list[RunResult]:
        """Times ``candidates`` (of one problem, compiled before) again, together, for the final
        choice (see :mod:`tilesearch.runner.retime`), and ``peers`` (other tools' kernels,
        :mod:`tilesearch.runner.peer`) beside them; one result per candidate, then one per peer,
        in order. A GPU runner does it in fresh worker processes (:mod:`tilesearch.runner.pool`),
        the candidates, the peers and the baseline interleaved in the same rounds. This default
        runs each candidate alone through :meth:`run` (a replay runner thus serves its records
        again), and the results say so:
        ``extra["retimed_together"]`` is absent; it cannot time peers."""
        return [self.run(c) for c in candidates] + untimed(peers, "this runner times no peers")

    def expect_retime(self) -> None:
        """Says, before the search, that a :meth:`retime` will follow it: a runner that re-times
        in fresh worker processes may start them now, in the background, so that the re-time
        finds them ready (no-op by default)."""

    def phases(self) -> dict[str, float]:
        """Seconds of the runner's own work since the last call, by phase name, for
        :mod:`tilesearch.phases` (fresh worker processes started in the background, and the
        re-time's wait for them); none by default."""
        return {}

    def close(self) -> None:
        """Stops worker processes (no-op by default)."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def versions(self) -> dict[str, str]:
        """Software versions on the measuring side."""
        return {}
