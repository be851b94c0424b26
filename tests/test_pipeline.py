import pytest

from tilesearch import tune
from tilesearch.builder import NullBuilder
from tilesearch.strategy import Strategy
from tilesearch.strategy.base import Proposal
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP


class _Measuring(SyntheticRunner):
    replayed = False


def test_tune_reports_compile_throughput_and_gpu_idle_share():
    result = tune(TOY_OP, {"size": 64}, runner=_Measuring(), builder=NullBuilder(), strategy="random",
                  trials=12, storage=":memory:", progress=False)
    assert result.measured_now == 12
    assert result.compile_per_min > 0
    assert 0.0 <= result.gpu_idle <= 1.0



class _JitteryBuilder(NullBuilder):
    """Compiles nothing, but finishes its builds after random delays, in an order that differs
    from launch order and from one builder to the next (as a warm compile cache reorders them)."""

    workers = 3

    def __init__(self, seed: int) -> None:
        import random
        from concurrent.futures import ThreadPoolExecutor

        self.rng = random.Random(seed)
        self.pool = ThreadPoolExecutor(self.workers + 1)

    def submit(self, candidate):
        import time

        from tilesearch.records import BuildResult

        delay = self.rng.random() * 0.03
        return self.pool.submit(lambda: (time.sleep(delay), BuildResult(candidate, ok=True))[1])

    def close(self) -> None:
        self.pool.shutdown()


@pytest.mark.parametrize("strategy", ["xgb", "tpe"])
def test_a_rerun_proposes_the_same_configurations_whatever_order_builds_finish_in(tmp_path, strategy):
    """Results reach the strategy in launch order, so two runs with the same seed propose the same
    sequence even when their compiles finish in different orders (the trust issue's reruns)."""
    import optuna

    orders = []
    for jitter in (1, 2):
        storage = f"sqlite:///{tmp_path}/run{jitter}.db"
        result = tune(TOY_OP, {"size": 64}, runner=_Measuring(), builder=_JitteryBuilder(jitter), strategy=strategy,
                      trials=40, storage=storage, progress=False, retime=0)
        study = optuna.load_study(study_name=result.study, storage=storage)
        orders.append([tuple(sorted(t.params.items())) for t in study.trials])
    assert len(orders[0]) >= 40  # (with results taken as they finished, these diverged at trial 21 and 11)
    assert orders[0] == orders[1]


class _Slow(_Measuring):
    def run(self, candidate, incumbent=None):
        import time

        time.sleep(0.02)
        return super().run(candidate, incumbent)


@pytest.mark.parametrize("strategy", ["xgb", "tpe"])
def test_the_same_seed_proposes_the_same_whether_the_runner_is_fast_or_slow(tmp_path, strategy):
    """The measuring thread may finish several results before the tuning process looks; proposals
    follow each record as they did when the tuning process took one result at a time."""
    import optuna

    orders = []
    for runner in (_Measuring(), _Slow()):
        storage = f"sqlite:///{tmp_path}/{type(runner).__name__}.db"
        result = tune(TOY_OP, {"size": 64}, runner=runner, builder=NullBuilder(), strategy=strategy, trials=16,
                      storage=storage, progress=False, retime=0)
        study = optuna.load_study(study_name=result.study, storage=storage)
        orders.append([tuple(sorted(t.params.items())) for t in study.trials])
    assert len(orders[0]) >= 16 and orders[0] == orders[1]


class _SlowFirst(_JitteryBuilder):
    """The first candidate compiles for ``first_s``, the others at once; notes each candidate's key
    and when it was submitted, and when the first compile ended."""

    def __init__(self, first_s: float = 0.5) -> None:
        super().__init__(0)
        self.first_s = first_s
        self.submitted: list[str] = []
        self.submitted_at: list[float] = []
        self.first_done: float | None = None

    def submit(self, candidate):
        import time

        from tilesearch.records import BuildResult

        first = not self.submitted
        self.submitted.append(candidate.key)
        self.submitted_at.append(time.perf_counter())

        def build():
            if first:
                time.sleep(self.first_s)
                self.first_done = time.perf_counter()
            return BuildResult(candidate, ok=True)
        return self.pool.submit(build)


class _Ordered(_Measuring):
    def __init__(self):
        super().__init__()
        self.measured: list[str] = []

    def run(self, candidate, incumbent=None):
        self.measured.append(candidate.key)
        return super().run(candidate, incumbent)


def test_the_runner_takes_a_compiled_kernel_while_an_older_one_compiles_and_results_are_recorded_in_order(monkeypatch):
    from tilesearch.database import TuningDatabase

    recorded = []
    record = TuningDatabase.record
    monkeypatch.setattr(TuningDatabase, "record",
                        lambda self, trial, build, run: (recorded.append(trial.number), record(self, trial, build, run))[1])
    builder, runner = _SlowFirst(), _Ordered()
    tune(TOY_OP, {"size": 64}, runner=runner, builder=builder, strategy="tpe", trials=8, storage=":memory:",
         progress=False, retime=0, polish=0)
    assert runner.measured[0] != builder.submitted[0]  # (it waited for the slow first one: they were equal)
    assert sorted(runner.measured) == sorted(builder.submitted) and len(runner.measured) == 8
    assert recorded == sorted(recorded) and len(recorded) == 8  # launch order, as the strategy sees them


@pytest.mark.parametrize("patience, passes", [(0.3, True), (30.0, False)])
def test_a_compile_that_holds_the_gpu_up_past_patience_is_passed(monkeypatch, patience, passes):
    """Once the oldest trial has compiled for PATIENCE s, the results after it are recorded and the
    pipeline refills: the whole budget is launched while it compiles. Within its patience, results
    keep launch order and the pipeline waits (3 workers: 7 in flight)."""
    from tilesearch import tuner
    from tilesearch.database import TuningDatabase

    monkeypatch.setattr(tuner, "PATIENCE", patience)
    recorded = []
    record = TuningDatabase.record
    monkeypatch.setattr(TuningDatabase, "record",
                        lambda self, trial, build, run: (recorded.append(trial.number), record(self, trial, build, run))[1])
    builder = _SlowFirst(first_s=3.0)  # (long beside the 16 launches a loaded CI machine makes meanwhile)
    result = tune(TOY_OP, {"size": 64}, runner=_Measuring(), builder=builder, strategy="random", trials=16,
                  storage=":memory:", progress=False, retime=0, polish=0)
    assert result.measured_now == 16 and sorted(recorded) == list(range(16))
    first = recorded.index(0)
    launched_meanwhile = sum(t < builder.first_done for t in builder.submitted_at)
    if passes:
        assert first == 15 and result.passed == 15  # recorded last, everything else past it
        assert launched_meanwhile == 16
    else:
        assert recorded == list(range(16)) and result.passed == 0
        assert launched_meanwhile == 7  # the pipeline's depth: it waited


def test_the_runner_measures_on_while_the_tuning_process_records(monkeypatch):
    # a raced trial is timed in about 0.1 s, its record took about as long: the GPU waited on it
    import time

    from tilesearch.database import TuningDatabase

    runner, during = _Ordered(), []
    record = TuningDatabase.record

    def slow_record(self, trial, build, run):
        before = len(runner.measured)
        time.sleep(0.05)
        during.append(len(runner.measured) - before)
        return record(self, trial, build, run)

    monkeypatch.setattr(TuningDatabase, "record", slow_record)
    tune(TOY_OP, {"size": 64}, runner=runner, builder=_JitteryBuilder(0), strategy="random", trials=12,
         storage=":memory:", progress=False, retime=0)
    assert max(during) >= 2  # (one at most, when the tuning process handed each kernel on)


class _Batching(NullBuilder):
    """One worker that compiles up to four candidates together; remembers how many were launched
    before the first measurement."""

    workers, batch = 1, 4

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, candidate):
        self.submitted += 1
        return super().submit(candidate)


class _Counting(_Measuring):
    def __init__(self, builder):
        super().__init__()
        self.builder, self.launched_at_first = builder, None

    def run(self, candidate, incumbent=None):
        if self.launched_at_first is None:
            self.launched_at_first = self.builder.submitted
        return super().run(candidate, incumbent)


@pytest.mark.parametrize("strategy, ahead", [("grid", 4 + 2), ("random", 4 + 2), ("xgb", 1 + 2), ("tpe", 1 + 2 + 8)])
def test_a_strategy_that_does_not_learn_fills_the_compile_pools_batches(strategy, ahead):
    # a grid's proposals need no results: the pool's batches fill (1 worker x 4, and a round of 2);
    # a search that learns proposes a round beyond the workers only, and TPE also the four rounds
    # of 2 it would propose before its 10 random start-up trials have finished (Strategy.blind)
    builder = _Batching()
    runner = _Counting(builder)
    tune(TOY_OP, {"size": 64}, runner=runner, builder=builder, strategy=strategy, trials=12, storage=":memory:",
         progress=False, retime=0)
    assert runner.launched_at_first == ahead


class _Watching(Strategy):
    """Proposes valid configurations in a fixed order and notes, for each proposal, how many
    results the study held when it was made."""

    def __init__(self, blind: int) -> None:
        self.blind, self.seen, self.next = blind, [], 0

    def propose(self, context, n):
        configs = context.space.listing()
        out = [Proposal(configs[i]) for i in range(self.next, min(self.next + n, len(configs)))]
        self.next += len(out)
        self.seen += [len(context.db.finished())] * len(out)
        return out


@pytest.mark.parametrize("blind", [1, 5, 10, 11])
def test_the_blind_start_launches_at_once_and_every_later_proposal_sees_the_results_it_saw_before(blind):
    """A strategy whose proposals ignore results until it has ``blind`` of them (TPE's random
    start) has all those proposals launched with the first; each proposal made with results is
    made after as many records as with no blind start, so what the strategy learns from is the same."""
    seen = {}
    for declared in (0, blind):
        strategy = _Watching(declared)
        tune(TOY_OP, {"size": 64}, runner=_Measuring(), builder=_JitteryBuilder(1), strategy=strategy, trials=40,
             storage=":memory:", progress=False, retime=0, polish=0)
        seen[declared] = strategy.seen
    before, now = seen[0], seen[blind]
    assert len(before) == len(now) == 40
    steered = [i for i, n in enumerate(before) if n >= blind]  # proposals that could depend on results
    assert steered and [now[i] for i in steered] == [before[i] for i in steered]
    round_ = min(4, _JitteryBuilder.workers + 1)
    ahead = sum(1 for n in before if 0 < n < blind)  # launched later before, with no result steering them
    assert ahead == round_ * ((blind - 1) // round_)
    assert now.count(0) == before.count(0) + ahead  # ... now with the first
