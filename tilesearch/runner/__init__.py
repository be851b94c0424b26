"""Runners: check and time built candidates. :func:`create` makes one from a short spec."""

from __future__ import annotations

from collections.abc import Callable

from tilesearch.runner.base import NoDeviceError, Runner
from tilesearch.runner.local import LocalRunner
from tilesearch.runner.measure import MeasureSettings
from tilesearch.runner.replay import ReplayRunner
from tilesearch.runner.retime import final_retime


class UnknownRunnerError(ValueError):
    """A runner spec that names no runner, or lacks its argument."""


def _local(arg: str, device: int, timeout: float, measure: MeasureSettings | None) -> Runner:
    return LocalRunner(device=device, timeout=timeout, settings=measure)


def _replay(arg: str, device: int, timeout: float, measure: MeasureSettings | None) -> Runner:
    if not arg:
        raise UnknownRunnerError("runner=replay needs a dataset: runner=replay:experiments/data/FILE.jsonl.gz")
    return ReplayRunner(arg)


RUNNERS: dict[str, Callable[[str, int, float, MeasureSettings | None], Runner]] = {
    "local": _local,
    "replay": _replay,
}


def create(spec: str | Runner, *, device: int = 0, timeout: float = 60.0, measure: MeasureSettings | None = None) -> Runner:
    """A runner from ``local`` or ``replay:PATH`` (or the instance itself)."""
    if isinstance(spec, Runner):
        return spec
    kind, _, arg = spec.partition(":")
    if kind not in RUNNERS:
        raise UnknownRunnerError(f"unknown runner {spec!r}; use local or replay:PATH")
    return RUNNERS[kind](arg, device, timeout, measure)


__all__ = ["RUNNERS", "LocalRunner", "MeasureSettings", "NoDeviceError", "ReplayRunner", "Runner",
           "UnknownRunnerError", "create", "final_retime"]
