"""Statistics of timing samples: the distribution of one kernel, and its ratio to the baseline
with a confidence interval.

Kernel and baseline are timed in interleaved *rounds* (one run of each per round), so a round's
times share the clock and temperature of that moment. The ratio's interval is a paired bootstrap
over rounds: rounds are resampled with their kernel and baseline times together, which keeps the
drift common to both out of the interval. The resampling is seeded, so the same samples always
give the same interval. Pure numpy: it runs in the runner's worker process and in CPU tests alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Spread:
    """One kernel's times: median, quartiles, runs, and the 95% interval of the median."""

    median: float
    q1: float
    q3: float
    runs: int
    low: float
    high: float


@dataclass(frozen=True)
class Ratio:
    """``baseline / kernel`` (above 1: the kernel is faster) with its 95% interval."""

    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the value: 0.01 is +-1%."""
        return (self.high - self.low) / 2 / self.value if self.value else float("inf")


def _resamples(rounds: int, seed: int, resamples: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, rounds, size=(resamples, rounds))


def _bounds(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def spread(samples: Sequence[float], *, seed: int = 0, confidence: float = CONFIDENCE,
           resamples: int = RESAMPLES) -> Spread:
    """The distribution of ``samples`` (milliseconds) and a bootstrap interval of its median."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples")
    q1, median, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    medians = np.median(x[_resamples(x.size, seed, resamples)], axis=1)
    low, high = _bounds(medians, confidence)
    return Spread(median, q1, q3, int(x.size), low, high)


def ratio(baseline: Sequence[float], kernel: Sequence[float], *, seed: int = 0, confidence: float = CONFIDENCE,
          resamples: int = RESAMPLES) -> Ratio:
    """``median(baseline) / median(kernel)`` over paired rounds, with a paired bootstrap interval.

    ``baseline[i]`` and ``kernel[i]`` must come from the same round."""
    b, k = np.asarray(baseline, dtype=float), np.asarray(kernel, dtype=float)
    if b.size != k.size or b.size == 0:
        raise ValueError(f"paired rounds needed: {b.size} baseline and {k.size} kernel samples")
    index = _resamples(b.size, seed, resamples)
    ratios = np.median(b[index], axis=1) / np.median(k[index], axis=1)
    low, high = _bounds(ratios, confidence)
    return Ratio(float(np.median(b) / np.median(k)), low, high)


def precise(intervals: Sequence[Ratio | Spread], target: float) -> bool:
    """Whether every interval is within ``+-target`` (relative) of its value."""
    for it in intervals:
        centre = it.value if isinstance(it, Ratio) else it.median
        if centre <= 0 or (it.high - it.low) / 2 / centre > target:
            return False
    return True


def overlap(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool:
    """Whether two closed intervals ``(low, high)`` share a point; one without bounds overlaps none."""
    if None in a or None in b:
        return False
    return a[0] <= b[1] and b[0] <= a[1]  # type: ignore[operator]


# -- several processes --
#
# Within one process, rounds are not the whole story: where the inputs happen to sit in memory and
# the state the process's CUDA context starts in shift a short kernel's ratio by up to 1% for the
# life of the process (26 us GEMMs on an H100: per-process ratios 0.883-0.893, each interval
# +-0.3%), so an interval from one process's rounds is too narrow for the next process's figure.
# The final re-time therefore pools several fresh processes, and these intervals resample at both
# levels: processes with replacement, then each chosen process's rounds (a nested bootstrap).


def _nested(groups: Sequence[tuple[np.ndarray, ...]], statistic: Callable[..., np.ndarray], seed: int,
            resamples: int) -> np.ndarray:
    """The mean over processes of ``statistic`` of each process's rounds, for each nested resample
    of ``groups`` (per process, arrays of equal length): processes drawn with replacement, then
    each drawn process's rounds. ``statistic`` takes arrays of resampled rounds, one row a
    resample, and returns a figure per row.

    Vectorised over resamples, a process at a time: a loop over the 2,000 resamples in Python took
    0.2 s per candidate on the CPU machine, paid at the end of every ``tune`` (the final re-time's
    pooling) while nothing else ran. Every draw of a process in every resample still resamples
    its rounds anew."""
    rng = np.random.default_rng(seed)
    picked = rng.integers(0, len(groups), size=(resamples, len(groups)))
    totals = np.zeros(resamples)
    for g, arrays in enumerate(groups):
        draws = np.nonzero(picked == g)[0]  # the resample of each draw of process g
        if draws.size:
            rows = rng.integers(0, arrays[0].size, size=(draws.size, arrays[0].size))
            np.add.at(totals, draws, statistic(*(a[rows] for a in arrays)))
    return totals / len(groups)


# The centre is the mean of the processes' own figures, not the figure of all rounds thrown
# together: processes run at different clocks, so pooled kernel and baseline times can each be
# bimodal, and the ratio of their two medians then fell outside every process's ratio (0.987 from
# processes at 0.997 and 0.991, an 8192^3 GEMM on an H100).


def pooled_spread(processes: Sequence[Sequence[float]], *, seed: int = 0, confidence: float = CONFIDENCE,
                  resamples: int = RESAMPLES) -> Spread:
    """:func:`spread` of several processes' samples: the mean of their medians, quartiles of all
    samples together, and a nested-bootstrap interval."""
    if len(processes) == 1:
        return spread(processes[0], seed=seed, confidence=confidence, resamples=resamples)
    groups = [(np.asarray(p, dtype=float),) for p in processes]
    if any(g[0].size == 0 for g in groups):
        raise ValueError("no samples")
    x = np.concatenate([g[0] for g in groups])
    q1, q3 = (float(v) for v in np.percentile(x, [25, 75]))
    centre = float(np.mean([np.median(g[0]) for g in groups]))
    low, high = _bounds(_nested(groups, lambda x: np.median(x, axis=-1), seed, resamples), confidence)
    return Spread(centre, q1, q3, int(x.size), low, high)


def pooled_ratio(processes: Sequence[tuple[Sequence[float], Sequence[float]]], *, seed: int = 0,
                 confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Ratio:
    """:func:`ratio` over the paired rounds ``(baseline, kernel)`` of several processes: the mean
    of their ratios, with a nested-bootstrap interval (rounds stay paired within their process)."""
    if len(processes) == 1:
        return ratio(*processes[0], seed=seed, confidence=confidence, resamples=resamples)
    groups = [(np.asarray(b, dtype=float), np.asarray(k, dtype=float)) for b, k in processes]
    for b, k in groups:
        if b.size != k.size or b.size == 0:
            raise ValueError(f"paired rounds needed: {b.size} baseline and {k.size} kernel samples")

    def of(b: np.ndarray, k: np.ndarray) -> np.ndarray:
        return np.median(b, axis=-1) / np.median(k, axis=-1)

    low, high = _bounds(_nested(groups, of, seed, resamples), confidence)
    return Ratio(float(np.mean([of(b, k) for b, k in groups])), low, high)


# -- between runs --
#
# Even pooled, the processes of one final re-time run back to back, seconds apart, at one power
# state of the GPU. A second ``tune`` minutes later meets another: on an H100 at its 700 W limit,
# the same kernels' ratios to torch.matmul moved by up to 0.6% between two runs (1470 vs 1545 MHz),
# and 3 of 33 such pairs of 95% intervals missed each other (trust rounds 3d8bfea-5bddc78,
# ``experiments/results/trust``). The rms of those differences, 0.26%, gives each run a
# between-run standard deviation of about 0.15% beyond its rounds; :func:`with_drift` adds that
# component to an interval in quadrature.


def with_drift(r: Ratio, drift: float) -> Ratio:
    """``r`` with each half of its interval widened in quadrature by ``drift`` (relative, the 95%
    half-width of the between-run component): ``sqrt(half**2 + (drift * value)**2)``."""
    if drift <= 0:
        return r
    extra = drift * r.value
    low = r.value - float(np.hypot(r.value - r.low, extra))
    high = r.value + float(np.hypot(r.high - r.value, extra))
    return Ratio(r.value, low, high)
