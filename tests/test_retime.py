"""The final re-time of tune and its tie set, through the CPU runner and the replay runner."""

from tilesearch import cli
from tilesearch.database import TuningDatabase
from tilesearch.records import Retimed, RunResult, Status
from tilesearch.report import final_table
from tilesearch.runner.pool import disagree, pool
from tilesearch.runner.retime import select
from tilesearch.space import Categorical, Space
from tilesearch.testing.cpu import CpuRunner
from tilesearch.testing.faulty import FAULTY_CPU_OP
from tilesearch.testing.synthetic import synthetic_dataset
from tilesearch.tuner import tune

PROBLEM = {"m": 1024, "n": 1024, "k": 2048}
KNOBS = {"block_m": (64, 128), "block_n": (64, 128), "block_k": (32,), "num_stages": (2, 3), "threads": (128, 256),
         "panel_size": (0,), "warp_policy": ("square",)}


def entry(trial, speedup, low, high):
    return Retimed(trial, {"x": trial}, RunResult(Status.OK, latency_ms=1 / speedup, speedup=speedup,
                                                  speedup_low=low, speedup_high=high, latency_low=0.0,
                                                  latency_high=9.0))


def test_overlapping_intervals_form_the_tie_set_and_the_choice_is_deterministic():
    entries = [entry(4, 1.00, 0.99, 1.01), entry(7, 1.03, 1.02, 1.04), entry(2, 1.025, 1.015, 1.035),
               entry(9, 1.03, 1.025, 1.035), Retimed(5, {}, RunResult(Status.WRONG_RESULT, error="x"))]
    final = select(entries, together=True, replayed=False)
    assert [e.trial for e in final.entries] == [7, 9, 2, 4, 5]  # equal medians: lower trial number first
    assert final.basis == "speedup" and final.chosen.trial == 7 and final.ties == (7, 9, 2)
    assert select(list(reversed(entries)), together=True, replayed=False) == final
    # without a baseline the latency intervals decide; without intervals only the best is chosen
    plain = [Retimed(1, {}, RunResult(Status.OK, latency_ms=2.0)), Retimed(3, {}, RunResult(Status.OK, latency_ms=1.0))]
    final = select(plain, together=False, replayed=True)
    assert final.basis == "none" and final.ties == (3,)


def test_tune_retimes_its_top_together_on_the_cpu_and_stores_the_choice(tmp_path):
    storage = f"sqlite:///{tmp_path / 'cpu.db'}"
    space = Space([Categorical("fault", ("none",)), Categorical("block", (256, 512)), Categorical("threads", (128,))])
    with CpuRunner(timeout=60) as runner:
        result = tune(FAULTY_CPU_OP, {"n": 1 << 14}, space=space, runner=runner, strategy="grid",
                      trials=2, retime=2, storage=storage, progress=False)
    final = result.final
    assert final is not None and final.together and final.replayed and final.basis == "latency"
    # timed in two fresh worker processes (more if they disagreed), their rounds pooled; the raw
    # rounds stay out of the database
    processes = [e.result.extra["processes"] for e in final.entries]
    assert all(2 <= n <= 4 and e.result.runs == 15 * n for n, e in zip(processes, final.entries))
    assert not any("samples" in e.result.extra for e in final.entries)
    assert f"each of {max(processes)} fresh worker processes, pooled" in final_table(final)
    assert final.ties[0] == final.chosen.trial
    db = TuningDatabase(storage, result.study)
    assert db.final() == final and db.best(1)[0].number == final.chosen.trial
    # the search's own figures have their intervals too (a trial raced clearly behind the first: 3 rounds)
    assert all(r.latency_low is not None and r.runs == (3 if r.attrs.get("raced") else 5) for r in db.records())


def test_replayed_final_serves_the_recorded_figures_and_says_so(tmp_path, capsys):
    data = synthetic_dataset(tmp_path / "tiny.jsonl.gz", PROBLEM, KNOBS)
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    args = ["op=gemm", "m=1024", "n=1024", "k=2048", f"storage={storage}"]
    assert cli.main(["tune", *args, f"runner=replay:{data.path}", "strategy=random", "trials=6", "retime=3",
                     "progress=false"]) == 0
    out = capsys.readouterr().out
    assert "final re-time: [replayed] the recorded figures served again" in out
    assert cli.main(["show", *args]) == 0
    shown = capsys.readouterr().out
    assert "final re-time: [replayed]" in shown and "95% interval" in shown and "tie set" in shown
    (name,) = [line.split()[1] for line in shown.splitlines() if line.startswith("study:")]
    final = TuningDatabase(storage, name).final()
    assert final.replayed and not final.together and final.basis == "none" and 1 <= len(final.entries) <= 3
    assert final.chosen.result.latency_ms == min(e.result.latency_ms for e in final.entries)
    # resuming with nothing new to measure keeps the stored choice; a new trial makes it stale
    db = TuningDatabase(storage, name)
    assert db.final() is not None
    assert cli.main(["tune", *args, f"runner=replay:{data.path}", "strategy=random", "trials=7", "retime=0",
                     "progress=false"]) == 0
    assert TuningDatabase(storage, name).final() is None
    assert "no final re-time covers" in (cli.main(["show", *args]) == 0 and capsys.readouterr().out)


def timed(ms, low, high, rounds=(1.0, 1.0), **extra):
    return RunResult(Status.OK, latency_ms=ms, latency_low=low, latency_high=high, tflops=2.0 / ms,
                     extra={"samples": list(rounds), **extra})


def test_pool_takes_every_process_rounds_and_the_first_failure():
    a = [timed(1.0, 0.99, 1.01, (1.0, 1.02, 0.98)), timed(2.0, 1.9, 2.1, (2.0,) * 3)]
    b = [timed(1.1, 1.09, 1.11, (1.1, 1.12, 1.08)), RunResult(Status.WRONG_RESULT, error="off by 1", extra={"samples": [9]})]
    first, second = pool([a, b])
    assert first.runs == 6 and first.extra == {"processes": 2, "process_figures": [1.0, 1.1]}
    assert first.latency_ms == 1.05 and first.latency_low <= 1.0 and first.latency_high >= 1.1
    assert first.tflops == 2.0 / 1.05
    assert second.status == Status.WRONG_RESULT and second.extra == {}
    # one process: its figures as they came, less the rounds
    assert pool([a])[0].latency_ms == 1.0 and "samples" not in pool([a])[0].extra


def test_pool_widens_the_ratio_by_the_drift_between_runs():
    def paired(ms, base):
        return RunResult(Status.OK, latency_ms=ms, latency_low=ms, latency_high=ms, speedup=base / ms,
                         extra={"samples": [ms, ms * 1.001, ms * 0.999], "baseline_samples": [base] * 3})
    processes = [[paired(1.0, 0.9)], [paired(1.0, 0.9)]]
    narrow, = pool(processes)
    wide, = pool(processes, drift=0.003)
    assert wide.speedup == narrow.speedup and "drift" not in narrow.extra and wide.extra["drift"] == 0.003
    assert wide.speedup_low < narrow.speedup_low and wide.speedup_high > narrow.speedup_high
    assert wide.latency_low == narrow.latency_low  # the latency's interval is the rounds' alone


def test_another_process_is_asked_for_when_the_best_is_not_settled():
    agreeing = [[timed(1.0, 0.99, 1.01), timed(2.0, 1.9, 2.1)], [timed(1.005, 0.995, 1.015), timed(2.5, 2.4, 2.6)]]
    assert not disagree(agreeing)  # the second candidate differs, but it is not the best
    assert disagree([agreeing[0], [timed(1.05, 1.04, 1.06), timed(2.0, 1.9, 2.1)]])
    assert not disagree(agreeing[:1])


def test_only_contenders_within_the_margin_of_the_searchs_best_are_retimed():
    from types import SimpleNamespace

    from tilesearch.runner.retime import CONTENDER_MARGIN, contenders

    def record(number, tflops):
        return SimpleNamespace(number=number, status="ok", error=None, tflops=tflops, latency_ms=1 / tflops,
                               speedup=None, attrs={}, rel_err=0.0)

    top = [record(1, 100.0), record(2, 95.0), record(3, 100.0 * (1 - CONTENDER_MARGIN) - 0.1), record(4, 50.0)]
    assert [r.number for r in contenders(top)] == [1, 2]
    assert [r.number for r in contenders(top, margin=0.6)] == [1, 2, 3, 4]
    assert contenders([]) == []


def test_a_final_retime_of_earlier_runs_trials_compiles_them_in_the_pool_first(tmp_path):
    # on a fresh host each re-time process compiled them one after another (37-71 s a range size)
    from tilesearch.builder import NullBuilder

    class Recording(NullBuilder):
        def __init__(self):
            self.submitted = []

        def submit(self, candidate):
            self.submitted.append(candidate)
            return super().submit(candidate)

    space = Space([Categorical("fault", ("none",)), Categorical("block", (256, 512)), Categorical("threads", (128,))])

    def run(storage, retime):
        builder = Recording()
        result = tune(FAULTY_CPU_OP, {"n": 1 << 14}, space=space, runner=runner, builder=builder, strategy="grid",
                      trials=2, retime=retime, storage=f"sqlite:///{tmp_path / storage}", progress=False)
        return result, builder.submitted

    with CpuRunner(timeout=60) as runner:
        result, submitted = run("a.db", retime=2)  # compiled by the search itself: not again
        assert result.final is not None and len(submitted) == 2 and "compile re-timed" not in result.phases
        result, _ = run("b.db", retime=0)
        assert result.final is None
        result, submitted = run("b.db", retime=2)  # nothing left to search; the earlier run's trials re-timed
    assert result.final is not None and "compile re-timed" in result.phases
    assert sorted(c.config["block"] for c in submitted) == sorted(e.config["block"] for e in result.final.entries)
