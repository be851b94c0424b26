"""Serves measurements recorded in a replay dataset (:mod:`tilesearch.dataset`), without a GPU.

Every result it returns is marked ``replayed``, and so is every study and output of a run that
uses it. A configuration the dataset does not hold comes back as ``not_recorded``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tilesearch.dataset import Dataset, DatasetError, load
from tilesearch.op import Problem
from tilesearch.records import Candidate, Incumbent, RunResult, Status
from tilesearch.runner.base import Runner
from tilesearch.runner.peer import Peer, untimed
from tilesearch.space import Space
from tilesearch.target import Target


class ReplayRunner(Runner):
    """Answers each candidate with its row of ``data``.

    Args:
        data: a :class:`~tilesearch.dataset.Dataset` or the path of one.
    """

    replayed = True

    def __init__(self, data: Dataset | str | Path) -> None:
        self.data = data if isinstance(data, Dataset) else load(data)
        self.calls = 0

    @property
    def measured_by(self) -> str:  # type: ignore[override]
        return f"dataset:{self.data.name}"

    def start(self) -> Target:
        return Target.from_dict(self.data.meta["target"])

    @property
    def versions(self) -> dict[str, str]:
        return dict(self.data.meta.get("versions", {}))

    def prepare(self, problem: Problem, space: Space) -> Space:
        """The dataset's sub-space of ``space``; raises DatasetError for another op or problem."""
        if problem.op != self.data.op or problem.to_dict() != self.data.problem:
            raise DatasetError(
                f"{self.data.path} holds {self.data.op} {self.data.meta['problem_key']}; "
                f"this run asks for {problem.op} {problem.key}"
            )
        return self.data.restrict(space)

    def run(self, candidate: Candidate, incumbent: Incumbent | None = None) -> RunResult:
        """The recorded figures of ``candidate`` (a dataset's figures are served whole: nothing races)."""
        self.calls += 1
        return self._serve(candidate)

    def retime(self, candidates: Sequence[Candidate], peers: Sequence[Peer] = ()) -> list[RunResult]:
        """The recorded figures again (not counted in ``calls``): a dataset holds one timing per
        configuration and no interval, so the final choice of a replayed run is its best record.
        It holds no peer's figures: those come back ``not_recorded``."""
        return [self._serve(c) for c in candidates] + untimed(peers, f"replay: {self.data.name} holds no peers")

    def _serve(self, candidate: Candidate) -> RunResult:
        where = {"replayed_from": self.data.name}
        if candidate.op != self.data.op or candidate.problem != self.data.problem:
            return RunResult(Status.NOT_RECORDED, error=f"replay: {self.data.name} holds another problem",
                             replayed=True, extra=where)
        row = self.data.get(candidate.config)
        if row is None:
            return RunResult(Status.NOT_RECORDED, error=f"replay: {self.data.name} has no record of this configuration",
                             replayed=True, extra=where)
        if row.compile_s is not None:
            where["recorded_compile_s"] = row.compile_s
        return RunResult(
            Status(row.status), error=row.error, latency_ms=row.latency_ms, tflops=row.tflops,
            baseline_ms=row.baseline_ms, speedup=row.speedup, rel_err=row.rel_err,
            measure_s=row.measure_s or 0.0, replayed=True, extra=where,
        )
