"""The final re-time pooled over several fresh worker processes.

A short kernel's ratio to the baseline moves by up to 1% from one process to the next (where its
inputs sit, the state its context starts in), more than one process's rounds can show
(:mod:`tilesearch.runner.stats`, "several processes"). So :meth:`LocalRunner.retime
<tilesearch.runner.local.LocalRunner.retime>` times the same candidates in
``MeasureSettings.final_processes`` fresh processes one after another, each on its own inputs,
adds a process while they disagree on the best of several candidates (up to :data:`MAX_PROCESSES`;
one configuration alone gets none, as no choice rests on it), and :func:`pool`
makes one result per candidate from all of them: the mean of the processes' own figures, with a
nested-bootstrap interval over processes and their rounds (:func:`~tilesearch.runner.stats.pooled_ratio`),
the ratio's widened by the between-run drift (``MeasureSettings.drift``,
:func:`~tilesearch.runner.stats.with_drift`): what a second ``tune`` minutes later, at another
power state, may see beside this one. A worker returns its raw rounds in
``extra["samples"]`` (and the baseline's in ``extra["baseline_samples"]``); :func:`pool` takes
them out, so they never reach a database.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tilesearch.records import RunResult, Status
from tilesearch.runner import stats

MAX_PROCESSES = 4
SAMPLE_KEYS = ("samples", "baseline_samples", "phases")  # a process's own, taken out by pool()


def pool(processes: Sequence[Sequence[RunResult]], seed: int = 0, drift: float = 0.0) -> list[RunResult]:
    """One result per candidate from the results of the same candidates in each process: the
    first failure where any process failed; else the mean of the processes' figures, with
    nested-bootstrap intervals, the ratio's widened by ``drift``. Results without rounds (a runner that returns none) are the first
    process's, as they came."""
    out = []
    for column in zip(*processes):
        failed = [r for r in column if r.status != Status.OK]
        if failed:
            out.append(without_samples(failed[0]))
        elif any("samples" not in r.extra for r in column):
            out.append(without_samples(column[0]))
        else:
            out.append(_pooled(column, seed, drift))
    return out


def disagree(processes: Sequence[Sequence[RunResult]]) -> bool:
    """Whether the processes' figures of the best candidate (the fastest in the first process) have
    95% intervals that miss each other: then another process should settle it."""
    if len(processes) < 2:
        return False
    first = [r for r in processes[0] if r.status == Status.OK and r.latency_ms is not None]
    if not first:
        return False
    index = list(processes[0]).index(min(first, key=lambda r: r.latency_ms))  # type: ignore[arg-type,return-value]
    column = [p[index] for p in processes]
    if any(r.status != Status.OK for r in column):
        return False
    bounds = [(r.speedup_low, r.speedup_high) if r.speedup_low is not None else (r.latency_low, r.latency_high)
              for r in column]
    return not all(stats.overlap(a, b) for i, a in enumerate(bounds) for b in bounds[i + 1:])


def without_samples(result: RunResult) -> RunResult:
    if not any(k in result.extra for k in SAMPLE_KEYS):
        return result
    return replace(result, extra={k: v for k, v in result.extra.items() if k not in SAMPLE_KEYS})


def _pooled(column: Sequence[RunResult], seed: int, drift: float) -> RunResult:
    kernel = [r.extra["samples"] for r in column]
    spread = stats.pooled_spread(kernel, seed=seed)
    first = column[0]
    found: dict[str, Any] = dict(latency_ms=spread.median, latency_q1=spread.q1, latency_q3=spread.q3,
                       latency_low=spread.low, latency_high=spread.high, runs=spread.runs)
    if first.tflops is not None and first.latency_ms:
        found["tflops"] = first.tflops * first.latency_ms / spread.median  # the same FLOPs
    baselines = [r.extra.get("baseline_samples") for r in column]
    paired = all(b is not None for b in baselines)
    if paired:
        ratio = stats.with_drift(stats.pooled_ratio(list(zip(baselines, kernel)), seed=seed), drift)
        found.update(baseline_ms=statistics.median(x for b in baselines for x in b), speedup=ratio.value,
                     speedup_low=ratio.low, speedup_high=ratio.high)
    clocks = [r.sm_clock_mhz for r in column if r.sm_clock_mhz is not None]
    temps = [r.temp_c for r in column if r.temp_c is not None]
    powers = [r.power_w for r in column if r.power_w is not None]
    throttled = [r.throttled for r in column if r.throttled is not None]
    extra = {**without_samples(first).extra, "processes": len(column),
             "process_figures": [r.speedup if r.speedup is not None else r.latency_ms for r in column],
             **({"drift": drift} if drift > 0 and paired else {})}
    return replace(
        first, **found,
        rel_err=max((r.rel_err for r in column if r.rel_err is not None), default=None),
        max_err=max((r.max_err for r in column if r.max_err is not None), default=None),
        sm_clock_mhz=min(clocks) if clocks else None, temp_c=max(temps) if temps else None,
        power_w=max(powers) if powers else None, throttled=any(throttled) if throttled else None,
        measure_s=sum(r.measure_s for r in column), extra=extra,
    )
