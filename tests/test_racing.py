"""Racing in the search's measurement (issue 17): a trial clearly slower than the best so far
stops being timed, is marked ``raced`` and keeps its wider interval; one near or above the best
is timed exactly as without racing. Made-up rounds for the rule, the CPU runner end to end."""

import numpy as np
import pytest

from tilesearch import tune
from tilesearch.builder import NullBuilder
from tilesearch.database import TuningDatabase
from tilesearch.records import Incumbent, RunResult, Status
from tilesearch.report import best_table
from tilesearch.runner import stats
from tilesearch.runner.measure import MeasureSettings, adaptive, precise_enough, racer
from tilesearch.testing.cpu import SLEEPY_CPU_OP, CpuRunner
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP
from tilesearch.trial_table import rows

SETTINGS = MeasureSettings()
FIRST, LOOK, CAP = 60, 20, 600  # rounds: an 8192^3 GEMM's 200 ms batch, a first look, the 2 s cap


class Stream:
    """Paired (kernel, baseline) rounds of a kernel at ``ratio`` to the baseline, drawn once, so
    that the same rounds come back however they are split into batches."""

    def __init__(self, ratio, noise=0.02, seed=0):
        rng = np.random.default_rng(seed)
        drift = 1 + 0.05 * np.sin(np.arange(CAP) / 10)
        self.kernel = list(drift * (1 + noise * rng.standard_normal(CAP)))
        self.base = list(ratio * drift * (1 + noise * rng.standard_normal(CAP)))
        self.batches = []

    def take(self, n):
        done = sum(self.batches)
        self.batches.append(n)
        return [self.kernel[done:done + n], self.base[done:done + n]]


def timed(stream, incumbent, settings=SETTINGS):
    race = racer(incumbent, settings, baseline=True)
    samples = adaptive(stream.take, first=FIRST, cap=CAP, look=LOOK, race=race,
                       enough=lambda s: precise_enough(s, settings, baseline=True))
    return samples, race


def test_a_clearly_slower_trial_stops_after_the_look_and_says_so():
    stream = Stream(ratio=0.80)
    samples, race = timed(stream, Incumbent(speedup=0.99))
    assert stream.batches == [LOOK] and len(samples[0]) == LOOK
    assert race.stopped and race.record() == {"raced": True, "raced_against": 0.99}
    ratio = stats.ratio(samples[1], samples[0])
    assert ratio.high < 0.97 * 0.99 and ratio.low < 0.80 < ratio.high  # wider, but it still covers


@pytest.mark.parametrize("ratio", [0.975, 0.99, 1.0, 1.05])
def test_a_trial_near_or_above_the_incumbent_is_timed_as_without_racing(ratio):
    """Within the 3% margin or faster: the same rounds, the same stop, the same +-1%."""
    raced, plain = Stream(ratio, seed=7), Stream(ratio, seed=7)
    with_race, race = timed(raced, Incumbent(speedup=1.0))
    without = adaptive(plain.take, first=FIRST, cap=CAP, enough=lambda s: precise_enough(s, SETTINGS, baseline=True))
    assert with_race == without and not race.stopped and race.record() == {}
    assert raced.batches[:3] == [LOOK, LOOK, LOOK]  # the looks double the rounds up to the first batch
    assert stats.ratio(with_race[1], with_race[0]).half_width <= 0.01


def test_the_looks_double_so_a_short_kernel_is_timed_as_long_as_its_distance_needs():
    """A 20 us kernel: 600 rounds in the first batch, a first look of 25 (5 ms). Far behind, it
    stops at the first look; a little behind and noisy, at a later look, each one doubling the
    rounds in, still before the first batch is through."""
    far, near = Stream(ratio=0.5), Stream(ratio=0.93, noise=0.08, seed=5)
    for stream in (far, near):
        samples = adaptive(stream.take, first=600, cap=CAP, look=25, race=racer(Incumbent(speedup=1.0), SETTINGS, baseline=True),
                           enough=lambda s: precise_enough(s, SETTINGS, baseline=True))
        assert stream.batches == [25 * 2 ** max(0, i - 1) for i in range(len(stream.batches))]
        assert len(samples[0]) == sum(stream.batches) < 600
    assert far.batches == [25] and len(near.batches) > 1


def test_the_race_also_stops_a_later_batch_but_never_before_precision_decides():
    # a kernel 4% behind, too noisy to be decided at the look: it goes on, and stops once its
    # interval clears the margin, before the +-1% it would otherwise be timed to
    stream = Stream(ratio=0.955, noise=0.08, seed=3)
    samples, race = timed(stream, Incumbent(speedup=1.0))
    assert len(stream.batches) > 1 and race.stopped
    assert len(samples[0]) < CAP and stats.ratio(samples[1], samples[0], resamples=500).high < 0.97


def test_the_rule_races_against_the_bounds_and_only_with_an_incumbent():
    base, kernel = [1.0] * 40, [1.0 / 0.95] * 40  # ratio 0.95 exactly, no spread
    assert racer(Incumbent(speedup=0.98), SETTINGS, baseline=True)([kernel, base])  # 0.95 < 0.97 * 0.98
    assert not racer(Incumbent(speedup=0.975), SETTINGS, baseline=True)([kernel, base])  # 0.95 > 0.97 * 0.975
    # without a baseline, latencies: 1.0 ms against an incumbent of 0.96 ms (0.97 * 1.0 > 0.96)
    assert racer(Incumbent(latency_ms=0.96), SETTINGS, baseline=False)([[1.0] * 40])
    assert not racer(Incumbent(latency_ms=0.98), SETTINGS, baseline=False)([[1.0] * 40])
    assert racer(None, SETTINGS, baseline=True) is None
    assert racer(Incumbent(), SETTINGS, baseline=True) is None
    assert racer(Incumbent(latency_ms=1.0), SETTINGS, baseline=True) is None  # no ratio to race against
    assert racer(Incumbent(speedup=1.0), MeasureSettings(race_margin=0.0), baseline=True) is None


def test_the_incumbent_is_the_best_bound_of_the_correct_results():
    ok = RunResult(Status.OK, latency_ms=1.0, latency_high=1.02, speedup=0.99, speedup_low=0.98)
    faster = RunResult(Status.OK, latency_ms=0.9, speedup=1.1)  # no intervals: its figures
    wrong = RunResult(Status.WRONG_RESULT, latency_ms=0.1, speedup=10.0)
    assert Incumbent().updated(ok) == Incumbent(speedup=0.98, latency_ms=1.02)
    assert Incumbent().updated(ok).updated(wrong) == Incumbent(speedup=0.98, latency_ms=1.02)
    assert Incumbent().updated(ok).updated(faster).updated(ok) == Incumbent(speedup=1.1, latency_ms=0.9)


class Watching(SyntheticRunner):
    """Remembers the incumbent handed over with each candidate."""

    replayed = False

    def __init__(self):
        super().__init__()
        self.incumbents = []

    def run(self, candidate, incumbent=None):
        self.incumbents.append(incumbent)
        return super().run(candidate, incumbent)


def test_the_tuning_loop_hands_the_runner_the_best_so_far_and_keys_stay_the_same(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    runner = Watching()
    result = tune(TOY_OP, {"size": 64}, runner=runner, builder=NullBuilder(), strategy="random", trials=8,
                  storage=storage, progress=False, retime=0)
    seen = Incumbent()
    for candidate, incumbent in zip(runner.calls, runner.incumbents):
        assert incumbent == seen  # the best of the results before this one
        seen = seen.updated(runner._result(candidate))
    assert seen.latency_ms == min(r.latency_ms for r in result.best)
    db = TuningDatabase(storage, result.study)
    assert sorted(c.key for c in runner.calls) == sorted(r.key for r in db.records())  # the claims' keys
    # a resumed run starts from the best the study holds
    again = Watching()
    tune(TOY_OP, {"size": 64}, runner=again, builder=NullBuilder(), strategy="random", trials=10, storage=storage,
         progress=False, retime=0)
    assert again.incumbents[0] == Incumbent(latency_ms=seen.latency_ms)


def test_raced_trials_are_recorded_shown_and_exported_on_the_cpu(tmp_path):
    """Sleeping kernels of 10 ms and 200 ms, in that order (grid): the 200 ms ones race clearly
    behind the 10 ms ones and stop after the look; the second 10 ms one is timed in full."""
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with CpuRunner(timeout=60) as runner:
        result = tune(SLEEPY_CPU_OP, {"n": 1024}, runner=runner, strategy="grid", trials=4, retime=0,
                      storage=storage, progress=False)
    records = {(r.config["sleep_ms"], r.config["copy"]): r for r in TuningDatabase(storage, result.study).records()}
    first = records[10, "a"]
    assert first.runs == 5 and "raced" not in first.attrs
    assert records[10, "b"].runs == 5 and "raced" not in records[10, "b"].attrs
    for copy in "ab":
        slow = records[200, copy]
        assert slow.status == "ok" and slow.runs == 3 and slow.attrs["raced"] is True
        assert slow.attrs["raced_against"] == min(first.latency_high, records[10, "b"].latency_high)
    assert result.raced == 2
    table = {(row["config.sleep_ms"], row["config.copy"]): row["raced"] for row in rows(TuningDatabase(storage, result.study))}
    assert table == {(10, "a"): False, (10, "b"): False, (200, "a"): True, (200, "b"): True}
    shown = best_table(TuningDatabase(storage, result.study).best(4))
    assert "3r" in shown and "r: raced (trials" in shown


def test_race_false_times_every_trial_in_full(tmp_path):
    from tilesearch.tuner import TuneSettings, make_runner

    assert make_runner(TuneSettings(race=False)).settings.race_margin == 0.0
    assert make_runner(TuneSettings()).settings.race_margin == MeasureSettings().race_margin > 0
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with CpuRunner(timeout=60, settings=MeasureSettings(race_margin=0.0)) as runner:
        result = tune(SLEEPY_CPU_OP, {"n": 1024}, runner=runner, strategy="grid", trials=3, retime=0,
                      storage=storage, progress=False)
    assert result.raced == 0 and all(r.runs == 5 for r in TuningDatabase(storage, result.study).records())


def test_once_a_trial_raced_trials_are_ranked_by_their_ratio_not_their_latency():
    """Regression: raced trials timed at the boost clock had the study's lowest latencies and
    worse ratios, and ranked by latency they filled the final re-time (2048x14336x4096 on the
    H100: it chose 0.906x torch.matmul where the other search found 0.961x)."""
    from tilesearch.records import RunResult, Status, speeds

    full = RunResult(Status.OK, latency_ms=0.364, speedup=0.951, tflops=661.0)
    raced = RunResult(Status.OK, latency_ms=0.344, speedup=0.893, tflops=699.0, extra={"raced": True})
    wrong = RunResult(Status.WRONG_RESULT, latency_ms=0.2)
    assert speeds([full, raced, wrong]) == [0.951, 0.893, None]
    assert speeds([full, RunResult(Status.OK, latency_ms=0.344, speedup=0.893, tflops=699.0)]) == [661.0, 699.0]


def test_comparable_latencies_put_raced_trials_at_the_clock_of_the_full_ones():
    """Regression: a range's table compared raw latencies, and at 8932 rows (H200) a persistent
    256x128 tile raced beside a 1.27 ms baseline looked 4% ahead of a 128x256 one timed in full
    beside 1.46 ms, where by ratio it was 9% behind; it served 5633..11008 rows and lost 9.6% at
    8928 rows, timed side by side."""
    from tilesearch.records import RunResult, Status, comparable_ms

    full = RunResult(Status.OK, latency_ms=1.527, baseline_ms=1.458, speedup=0.954)
    raced = RunResult(Status.OK, latency_ms=1.462, baseline_ms=1.272, speedup=0.870, extra={"raced": True})
    wrong = RunResult(Status.WRONG_RESULT, latency_ms=0.2)
    ms = comparable_ms([full, raced, wrong])
    assert ms[0] == pytest.approx(1.458 / 0.954) and ms[1] == pytest.approx(1.458 / 0.870) and ms[2] is None
    assert ms[0] < ms[1]  # the raced tile is slower at one clock, though its own latency is lower
    unraced = [RunResult(Status.OK, latency_ms=1.5, baseline_ms=1.4, speedup=0.93)]
    assert comparable_ms(unraced) == [1.5]  # nothing raced: the latency, as speeds() ranks
