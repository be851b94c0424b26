"""The final re-time of tune and its tie set, through the CPU runner and the replay runner."""

from tilesearch import cli
from tilesearch.database import TuningDatabase
from tilesearch.records import Retimed, RunResult, Status
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
    result = tune(FAULTY_CPU_OP, {"n": 1 << 14}, space=space, runner=CpuRunner(timeout=60), strategy="grid",
                  trials=2, retime=2, storage=storage, progress=False)
    final = result.final
    assert final is not None and final.together and final.replayed and final.basis == "latency"
    assert len(final.entries) == 2 and all(e.result.runs == 15 for e in final.entries)
    assert final.ties[0] == final.chosen.trial
    db = TuningDatabase(storage, result.study)
    assert db.final() == final and db.best(1)[0].number == final.chosen.trial
    # the search's own figures have their intervals too
    assert all(r.latency_low is not None and r.runs == 5 for r in db.records())


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
    assert final.replayed and not final.together and final.basis == "none" and len(final.entries) == 3
    assert final.chosen.result.latency_ms == min(e.result.latency_ms for e in final.entries)
    # resuming with nothing new to measure keeps the stored choice; a new trial makes it stale
    db = TuningDatabase(storage, name)
    assert db.final() is not None
    assert cli.main(["tune", *args, f"runner=replay:{data.path}", "strategy=random", "trials=7", "retime=0",
                     "progress=false"]) == 0
    assert TuningDatabase(storage, name).final() is None
    assert "no final re-time covers" in (cli.main(["show", *args]) == 0 and capsys.readouterr().out)
