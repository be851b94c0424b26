"""Statistics of timing samples: the distribution of one kernel, and its ratio to the baseline
with a confidence interval.

Kernel and baseline are timed in interleaved *rounds* (one run of each per round), so a round's
times share the clock and temperature of that moment. The ratio's interval is a paired bootstrap
over rounds: rounds are resampled with their kernel and baseline times together, which keeps the
drift common to both out of the interval. The resampling is seeded, so the same samples always
give the same interval. Pure numpy: it runs in the runner's worker process and in CPU tests alike.
"""

from __future__ import annotations

from collections.abc import Sequence
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
