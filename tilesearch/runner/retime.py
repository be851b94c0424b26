"""The final re-time: a study's top configurations timed again together, then the choice.

Figures measured minutes apart during a search differ by as much as the gaps between the best
configurations, so the search's ranking is not the answer. :func:`final_retime` times the top
configurations again in fresh worker processes, all of them and the baseline interleaved in the same
rounds of each, the processes pooled (:meth:`~tilesearch.runner.base.Runner.retime`,
:mod:`tilesearch.runner.pool`), and :func:`select` ranks them: the best
is the fastest median after that step, and every configuration whose 95% interval overlaps the
best's is in its *tie set*. The choice within a tie set is deterministic: the fastest median,
then the lowest trial number. ``tune``, ``revalidate`` and experiment scripts all call this one
function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilesearch.records import Candidate, Final, Retimed, Status, is_correct, speeds
from tilesearch.runner.base import Runner
from tilesearch.runner.stats import overlap
from tilesearch.target import Target

# How far behind the search's best a configuration may be and still be re-timed. The same kernel's
# ratio to the baseline moved by up to 5% between two fresh processes minutes apart (0.982, then
# 0.934, on an H100: the kernels issue), and two search trials are timed minutes apart, so their
# figures may differ by about twice that without the kernels differing at all. One further
# behind cannot win a re-time; timing it anyway cost most of the re-time's rounds and loads in
# README's main command (its second best was 16% behind: 0.79 against 0.94).
CONTENDER_MARGIN = 0.10


def contenders(records: Sequence[Any], margin: float = CONTENDER_MARGIN) -> list[Any]:
    """The records (a study's best, fastest first) worth re-timing: those whose search figure
    (:func:`~tilesearch.records.speeds`) is within ``margin`` of the fastest's, in their order."""
    figures = speeds(records)
    known = [f for f in figures if f is not None]
    if not known:
        return list(records)
    floor = max(known) * (1 - margin)
    return [r for r, f in zip(records, figures) if f is None or f >= floor]


def final_retime(runner: Runner, trials: Sequence[tuple[int, dict[str, Any]]], *, op: str, problem: dict[str, Any],
                 target: Target, op_ref: str = "", runtime: tuple[str, ...] = ()) -> Final:
    """Re-times ``trials`` (``(trial number, config)`` pairs of one problem, compiled before,
    with the ``runtime`` parameters) with ``runner`` and returns the choice among them."""
    candidates = [Candidate(op, dict(problem), dict(config), target, op_ref, runtime) for _, config in trials]
    results = runner.retime(candidates)
    entries = [Retimed(number, dict(config), result) for (number, config), result in zip(trials, results)]
    together = bool(results) and all("retimed_together" in r.extra for r in results if r.status == Status.OK)
    return select(entries, together=together, replayed=runner.replayed)


def select(entries: Sequence[Retimed], *, together: bool, replayed: bool) -> Final:
    """Ranks re-timed entries (correct ones first, the fastest first) and finds the tie set."""
    ok = [e for e in entries if is_correct(e.result)]
    rest = [e for e in entries if e not in ok]
    if ok and all(e.result.speedup_low is not None and e.result.speedup is not None for e in ok):
        basis = "speedup"
        ok.sort(key=lambda e: (-e.result.speedup, e.trial))  # type: ignore[operator]
    else:
        basis = "latency" if ok and all(e.result.latency_low is not None for e in ok) else "none"
        ok.sort(key=lambda e: (e.result.latency_ms, e.trial))
    ties: tuple[int, ...] = ()
    if ok:
        best = _interval(ok[0], basis)
        ties = tuple(e.trial for e in ok if e is ok[0] or overlap(best, _interval(e, basis)))
    return Final(tuple(ok + rest), ties, basis, together, replayed)


def _interval(entry: Retimed, basis: str) -> tuple[float | None, float | None]:
    r = entry.result
    if basis == "speedup":
        return r.speedup_low, r.speedup_high
    if basis == "latency":
        return r.latency_low, r.latency_high
    return None, None
