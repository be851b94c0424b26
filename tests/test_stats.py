"""Intervals and adaptive stopping on synthetic timing samples (no GPU: made-up rounds)."""

import numpy as np
import pytest

from tilesearch.runner import nvml, stats
from tilesearch.runner.measure import MeasureSettings, adaptive, figures, precise_enough


def paired(rounds, ratio, noise, seed=0):
    """Kernel and baseline times of ``rounds`` rounds sharing a drifting clock."""
    rng = np.random.default_rng(seed)
    drift = 1 + 0.05 * np.sin(np.arange(rounds) / 10)  # common to both: cancels in the ratio
    kernel = drift * (1 + noise * rng.standard_normal(rounds))
    base = ratio * drift * (1 + noise * rng.standard_normal(rounds))
    return list(base), list(kernel)


def test_ratio_interval_covers_the_truth_and_is_seeded():
    base, kernel = paired(400, 1.05, 0.01)
    r = stats.ratio(base, kernel, seed=3)
    assert r.low < 1.05 < r.high and r.low < r.value < r.high and r.half_width < 0.01
    assert stats.ratio(base, kernel, seed=3) == r  # deterministic
    assert stats.ratio(base, kernel, seed=4) != r


def test_pooled_interval_covers_what_each_process_saw():
    # three processes of one kernel, each off by a constant of its own (where its inputs sat):
    # each process's interval is narrow and misses the others', the pooled one meets them all
    processes = [paired(800, 0.89 * shift, 0.003, seed=i) for i, shift in enumerate((1.0, 1.011, 1.005))]
    alone = [stats.ratio(*p) for p in processes]
    assert not stats.overlap((alone[0].low, alone[0].high), (alone[1].low, alone[1].high))
    pooled = stats.pooled_ratio(processes, seed=1)
    assert all(stats.overlap((pooled.low, pooled.high), (r.low, r.high)) for r in alone)
    assert pooled.high - pooled.low > 2 * max(r.high - r.low for r in alone)
    assert pooled.half_width < 0.01 and stats.pooled_ratio(processes, seed=1) == pooled
    assert stats.pooled_ratio(processes[:1], seed=1) == stats.ratio(*processes[0], seed=1)
    kernels = [k for _, k in processes]
    spread = stats.pooled_spread(kernels)
    assert spread.runs == 2400 and spread.low < min(np.median(k) for k in kernels) + 0.01
    with pytest.raises(ValueError):
        stats.pooled_ratio([(base, kernel[:-1]) for base, kernel in processes])


def test_interval_narrows_with_more_rounds():
    wide = stats.ratio(*paired(20, 1.0, 0.05))
    narrow = stats.ratio(*paired(2000, 1.0, 0.05))
    assert narrow.half_width < wide.half_width / 3


def test_spread_quartiles_and_median_interval():
    s = stats.spread([1.0, 2.0, 3.0, 4.0, 5.0] * 20)
    assert (s.median, s.q1, s.q3, s.runs) == (3.0, 2.0, 4.0, 100)
    assert s.low <= 3.0 <= s.high
    with pytest.raises(ValueError):
        stats.ratio([1.0], [1.0, 2.0])


def test_adaptive_stops_once_within_one_percent():
    rng = np.random.default_rng(0)
    taken = []

    def take(n):
        taken.append(n)
        base, kernel = paired(n, 1.02, 0.05, seed=int(rng.integers(1 << 30)))
        return [kernel, base]

    settings = MeasureSettings(precision=0.01)
    samples = adaptive(take, first=20, cap=100000, enough=lambda s: precise_enough(s, settings, baseline=True))
    assert len(taken) > 1 and taken[1] == 20  # it doubled
    r = stats.ratio(samples[1], samples[0])
    assert r.half_width <= 0.01
    # one round fewer would not have been enough at the previous doubling
    half = sum(taken[:-1])
    assert stats.ratio(samples[1][:half], samples[0][:half], resamples=500).half_width > 0.01


def test_adaptive_stops_at_the_cap_when_too_noisy():
    def take(n):
        base, kernel = paired(n, 1.0, 0.5)
        return [kernel, base]

    settings = MeasureSettings(precision=0.001)
    samples = adaptive(take, first=10, cap=70, enough=lambda s: precise_enough(s, settings, baseline=True))
    assert len(samples[0]) == 70


def test_figures_carry_the_interval():
    base, kernel = paired(300, 1.1, 0.01)
    found = figures(kernel, base, seed=0)
    assert found["speedup_low"] < found["speedup"] < found["speedup_high"] and found["runs"] == 300
    assert found["latency_q1"] <= found["latency_ms"] <= found["latency_q3"]
    assert "speedup" not in figures(kernel, None, seed=0)


def test_throttle_flag_against_the_usual_clock():
    seen = []
    assert not any(nvml.throttled(c, seen) for c in (1980, 1975, 1980))
    assert nvml.throttled(1400, seen)
    assert not nvml.throttled(1970, seen) and not nvml.throttled(None, seen)
    assert nvml.figures([nvml.Reading(1900, 60, 500), nvml.Reading(1800, 65, 650)]) == {
        "sm_clock_mhz": 1800, "temp_c": 65, "power_w": 650}
    assert nvml.figures([None]) == {}


def test_a_throttled_timing_is_taken_again_and_flagged_if_it_stays_low(monkeypatch):
    from tilesearch.runner import measure

    clocks = iter([1980, 1980, 1980, 1200, 1975, 1100, 1100])  # one reading per timing (one batch each)
    calls = []

    def fake_rounds(fns, settings, l2_bytes, busy=None, race=None):
        calls.append(1)
        busy()
        return [[1.0] * 10 for _ in fns]

    monkeypatch.setattr(measure, "rounds", fake_rounds)
    monkeypatch.setattr(nvml, "read", lambda: nvml.Reading(next(clocks), 60, 500))
    monkeypatch.setattr(nvml, "_SEEN", [])
    monkeypatch.setattr(measure.time, "sleep", lambda s: None)
    for _ in range(3):  # the usual level: 1980 MHz
        _, clock, again = measure.timed([None], MeasureSettings(), 0)
        assert clock["throttled"] is False and again == 0
    calls.clear()
    _, clock, again = measure.timed([None], MeasureSettings(), 0)  # 1200, then 1975: taken again, fine
    assert len(calls) == 2 and clock == {"sm_clock_mhz": 1975, "temp_c": 60, "power_w": 500, "throttled": False}
    assert again > 0  # the first try's seconds, which the worker reports as a phase of their own
    calls.clear()
    _, clock, again = measure.timed([None], MeasureSettings(), 0)  # 1100 twice: flagged
    assert len(calls) == 2 and clock["throttled"] is True and clock["sm_clock_mhz"] == 1100 and again > 0


def test_a_throttled_timing_beside_the_baseline_is_flagged_not_timed_again(monkeypatch):
    # the baseline ran in the same rounds at the same low clock: the ratios stand, won or lost
    from tilesearch.runner import measure

    calls = []

    def fake_rounds(fns, settings, l2_bytes, busy=None, race=None):
        calls.append(1)
        busy()
        samples = [[1.0] * 10 for _ in fns]
        if race is not None:
            race(samples)
        return samples

    monkeypatch.setattr(measure, "rounds", fake_rounds)
    monkeypatch.setattr(nvml, "_SEEN", [1980.0] * 3)
    monkeypatch.setattr(nvml, "read", lambda: nvml.Reading(1200, 60, 700))
    monkeypatch.setattr(measure.time, "sleep", lambda s: None)
    lost = measure.Race(2.0, baseline=True, margin=0.03, seed=0)  # the incumbent is twice the baseline's speed
    close = measure.Race(1.0, baseline=True, margin=0.03, seed=0)  # a trial near the incumbent
    for race in (lost, close, None):  # None: the final re-time, which never races
        calls.clear()
        _, clock, again = measure.timed([None, None], MeasureSettings(), 0, race, paired=True)
        assert len(calls) == 1 and again == 0 and clock["throttled"] is True and clock["sm_clock_mhz"] == 1200
    assert lost.stopped and not close.stopped
    calls.clear()
    nvml._SEEN[:] = [1980.0] * 3  # the usual level again, not the low readings above
    by_latency = measure.Race(0.5, baseline=False, margin=0.03, seed=0)  # no baseline: the clock is in the figure
    _, clock, again = measure.timed([None], MeasureSettings(), 0, by_latency)
    assert by_latency.stopped and len(calls) == 2 and again > 0 and clock["throttled"] is True


def test_drift_widens_the_interval_in_quadrature_and_keeps_the_value():
    r = stats.Ratio(0.92, 0.918, 0.923)
    wide = stats.with_drift(r, 0.003)
    assert wide.value == r.value and wide.low < r.low and wide.high > r.high
    assert wide.high - r.value == pytest.approx(np.hypot(0.003, 0.92 * 0.003))
    assert r.value - wide.low == pytest.approx(np.hypot(0.002, 0.92 * 0.003))
    assert stats.with_drift(r, 0.0) == r
    # two runs of the same kernels minutes apart (trust round 5bddc78, 3000x5000x4000): their
    # rounds' intervals missed each other by 0.1%; with the between-run component they meet
    first, second = stats.Ratio(0.9230, 0.9213, 0.9248), stats.Ratio(0.9175, 0.9160, 0.9191)
    assert not stats.overlap((first.low, first.high), (second.low, second.high))
    a, b = stats.with_drift(first, 0.003), stats.with_drift(second, 0.003)
    assert stats.overlap((a.low, a.high), (b.low, b.high)) and a.half_width < 0.01


def test_pooled_interval_matches_a_plain_nested_bootstrap():
    # the vectorised resampling against the plain loop it replaced: processes drawn with
    # replacement, then each drawn process's rounds, the mean of their ratios; seeds differ, so the
    # bounds agree to the bootstrap's own noise, not exactly
    processes = [paired(300, 0.95 * shift, 0.004, seed=i) for i, shift in enumerate((1.0, 1.008, 0.996))]
    rng = np.random.default_rng(7)
    arrays = [(np.asarray(b), np.asarray(k)) for b, k in processes]
    values = []
    for _ in range(4000):
        total = 0.0
        for g in rng.integers(0, len(arrays), size=len(arrays)):
            b, k = arrays[g]
            rows = rng.integers(0, b.size, size=b.size)
            total += np.median(b[rows]) / np.median(k[rows])
        values.append(total / len(arrays))
    low, high = np.percentile(values, [2.5, 97.5])
    pooled = stats.pooled_ratio(processes, seed=2)
    width = high - low
    assert abs(pooled.low - low) < 0.05 * width and abs(pooled.high - high) < 0.05 * width
