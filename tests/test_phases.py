"""Where a tuning run's time goes (tilesearch.phases), as ``tune`` reports it."""

import time

import pytest

from tilesearch import tune
from tilesearch.builder import NullBuilder
from tilesearch.phases import Phases, table
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP


def test_phases_add_up_named_spans_and_print_in_the_order_of_a_run():
    phases = Phases()
    with phases("propose"):
        time.sleep(0.02)
    with phases("propose"):
        time.sleep(0.01)
    phases.add("pool: compile", 12.0)
    phases.add("zz custom", 0.5)
    phases.add("spare: warm-up (background)", 3.0)
    assert 0.03 <= phases.seconds["propose"] < 0.5
    lines = table(phases.seconds, wall_s=1.0).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["propose", "pool:", "spare:", "zz"]
    assert lines[2].endswith("-")  # a pool's seconds add up over processes: no share of the wall
    assert lines[3].endswith("-")  # nor do a background start's, which overlap the search


class _Measuring(SyntheticRunner):
    replayed = False

    def run(self, candidate, incumbent=None):
        time.sleep(0.01)
        return super().run(candidate, incumbent)


def test_tune_reports_its_phases_the_first_result_and_how_busy_the_runner_was():
    result = tune(TOY_OP, {"size": 64}, runner=_Measuring(), builder=NullBuilder(), strategy="random",
                  trials=12, storage=":memory:", progress=False, retime=0)
    own = {k: v for k, v in result.phases.items() if not k.startswith(("pool:", "worker:"))}
    assert {"runner start", "study open", "propose", "database", "measure", "wait for measure"} <= set(own)
    # measure runs beside the tuning process's own phases, which add up to no more than the wall time
    assert own["measure"] >= 12 * 0.01 and own["wait for measure"] <= own["measure"] <= result.wall_s
    assert sum(v for k, v in own.items() if k != "measure") <= result.wall_s
    assert 0 < result.first_result_s < result.wall_s
    assert 0 < result.busy_after_first <= 1


def test_process_age_counts_from_the_process_start():
    import subprocess
    import sys

    if sys.platform != "linux":
        pytest.skip("process_age reads Linux's /proc")
    script = "import time\ntime.sleep(0.5)\nfrom tilesearch.phases import process_age\nprint(process_age())\n"
    age = float(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout)
    assert 0.5 <= age < 30


def test_tune_verbose_prints_the_phases(tmp_path):
    import subprocess
    import sys

    from tilesearch.testing.synthetic import synthetic_dataset

    problem = {"m": 1024, "n": 1024, "k": 1024, "dtype": "float16"}
    data = synthetic_dataset(tmp_path / "ds.jsonl.gz", problem,
                             {"block_m": (64, 128), "block_n": (64, 128), "block_k": (32,), "num_stages": (2, 3),
                              "threads": (128,), "panel_size": (0,), "warp_policy": ("square",)})
    done = subprocess.run([sys.executable, "-m", "tilesearch.cli", "tune", "op=gemm",
                           *(f"{k}={v}" for k, v in problem.items()), f"runner=replay:{data.path}", "trials=4",
                           f"storage=sqlite:///{tmp_path / 's.db'}", "progress=false", "verbose=true"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "first measured trial after" in out and "phase " in out and "\npropose " in out
    if sys.platform == "linux":  # the time the user waited, the command's imports and checks included
        assert "s after the command started); runner busy" in out
    assert "raced: 0 of 4 trials" in out  # a replayed dataset's figures are served whole


def test_the_runner_measures_the_next_trial_while_the_last_one_is_recorded(monkeypatch):
    """The GPU is not left idle while the tuning process writes a result: the record of the first
    trial waits until the runner has started the second, which a loop that records before it
    measures again would never do (the wait would time out)."""
    import threading

    from tilesearch.database import TuningDatabase

    second = threading.Event()
    seen = []

    class Counting(SyntheticRunner):
        replayed = False
        calls = 0

        def run(self, candidate, incumbent=None):
            Counting.calls += 1
            if Counting.calls == 2:
                second.set()
            return super().run(candidate, incumbent)

    record = TuningDatabase.record

    def slow_record(self, trial, build, run):
        if not seen:
            seen.append(second.wait(timeout=10))
        return record(self, trial, build, run)

    monkeypatch.setattr(TuningDatabase, "record", slow_record)
    result = tune(TOY_OP, {"size": 64}, runner=Counting(), builder=NullBuilder(), strategy="random",
                  trials=6, storage=":memory:", progress=False, retime=0)
    assert seen == [True]
    assert result.statuses == {"ok": 6}


def test_the_largest_sequential_phases_make_a_log_line_without_the_overlapping_ones():
    from tilesearch.phases import largest

    seconds = {"wait for build": 30.12, "measure": 99.0, "pool: compile": 400.0, "final re-time": 6.0,
               "propose": 0.01, "wait for measure": 5.25, "database": 1.0}
    # measure overlaps the others and the pool's seconds add up over processes: neither is wall time
    assert largest(seconds) == "wait for build 30.1 s, final re-time 6.0 s, wait for measure 5.2 s"
    assert largest(seconds, 5).endswith("database 1.0 s") and "propose" not in largest(seconds, 8)
    assert largest({}) == ""
