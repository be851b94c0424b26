"""Several tuning processes on one study: nothing measured twice, nothing lost to a killed worker."""

import collections
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import storages
from optuna.trial import TrialState

from tilesearch.cli import main
from tilesearch.database import TuningDatabase
from tilesearch.distributed import tune_parallel
from tilesearch.testing.toy import TOY_OP
from tilesearch.tuner import TuneSettings


def start_worker(url, study, log, trials, seed=0, delay=0.01, strategy="random"):
    args = [
        sys.executable, "-m", "tilesearch.testing.worker", f"storage={url}", f"study={study}",
        f"trials={trials}", f"strategy={strategy}", f"seed={seed}", "heartbeat=1", "depth=3",
        f"delay={delay}", f"log={log}",
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_all_exited_cleanly(procs, outs):
    """Every tuning process exited 0; else the whole standard error of each that did not is
    printed (pytest shows it with the failure; an assertion message of four tracebacks is cut)."""
    failed = [(proc.returncode, err) for proc, (_, err) in zip(procs, outs) if proc.returncode]
    for code, err in failed:
        print(f"--- a tuning process exited {code}; its standard error:\n{err}")
    assert not failed, [code for code, _ in failed]


def runs(log):
    """(key, pid) of every synthetic run, in order."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [tuple(line.split()) for line in f if line.strip()]


def measured(db):
    """Finished records that hold a measurement of their own (not a copy, not a yield)."""
    return [r for r in db.records()
            if r.duplicate_of is None and r.status not in ("invalid", "interrupted", "running", "waiting", "skipped")]


@pytest.mark.parametrize("kind", storages.SHARED)
def test_four_workers_share_one_study_and_measure_nothing_twice(kind, tmp_path):
    """All four start with the same seed, so they propose the same configurations first."""
    url, study, log, trials = storages.url(kind, tmp_path), storages.study("four"), str(tmp_path / "runs"), 40
    procs = [start_worker(url, study, log, trials) for _ in range(4)]
    outs = [proc.communicate(timeout=600) for proc in procs]
    assert_all_exited_cleanly(procs, outs)
    keys = [key for key, _ in runs(log)]
    assert len(keys) == len(set(keys))
    assert len(keys) == trials  # workers launching their last trials together do not overshoot
    assert len({pid for _, pid in runs(log)}) > 1
    db = TuningDatabase(url, study)
    records = measured(db)
    assert sorted(r.key for r in records) == sorted(keys)
    assert sum(json.loads(out)["measured_now"] for out, _ in outs) == len(keys)
    states = [t.state for t in db.trials()]
    assert TrialState.WAITING not in states and TrialState.RUNNING not in states  # issue 20: no leftovers
    assert states.count(TrialState.COMPLETE) == sum(r.status == "ok" for r in records)  # no copies


REPLAY = "experiments/data/gemm_4096x4096x4096_float16_nn_h100_80gb_hbm3.jsonl.gz"


@pytest.mark.parametrize("kind", storages.SHARED)
def test_four_cli_workers_with_the_replay_runner_share_one_study(kind, tmp_path):
    """``tilesearch worker`` as a user runs it, serving an H100 sweep instead of a GPU."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    url, study, trials = storages.url(kind, tmp_path), storages.study("replay"), 60
    args = [sys.executable, "-m", "tilesearch.cli", "worker", "op=gemm", "m=4096", "n=4096", "k=4096",
            "dtype=float16", f"runner=replay:{os.path.join(root, REPLAY)}", f"storage={url}", f"study={study}",
            f"trials={trials}", "strategy=random", "seed=0", "heartbeat=1", "progress=false"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [proc.communicate(timeout=600) for proc in procs]
    assert_all_exited_cleanly(procs, outs)
    db = TuningDatabase(url, study)
    records = measured(db)
    assert len(records) == len({r.key for r in records})
    assert len(records) == trials
    assert all(r.replayed for r in records)
    assert sum(int(out.split("measured now: ")[1].split()[0]) for out, _ in outs) == len(records)


@pytest.mark.parametrize("kind", storages.SHARED)
def test_a_killed_worker_loses_only_its_trials_in_flight(kind, tmp_path):
    url, study, log, trials = storages.url(kind, tmp_path), storages.study("kill"), str(tmp_path / "runs"), 36
    # the victim starts first and the others once it measures: started together, the others
    # could take the whole budget while the victim was still importing (it then exited before
    # its third trial), or finish before it was killed, leaving nobody to mark its trial
    victim = start_worker(url, study, log, trials, seed=0, delay=0.05)
    deadline = time.monotonic() + 300

    def victim_runs():
        return sum(pid == str(victim.pid) for _, pid in runs(log))

    while victim_runs() < 1:
        assert time.monotonic() < deadline and victim.poll() is None
        time.sleep(0.05)
    procs = [victim] + [start_worker(url, study, log, trials, seed=i, delay=0.05) for i in (1, 2)]
    while victim_runs() < 3:
        assert time.monotonic() < deadline and victim.poll() is None
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    for proc in procs[1:]:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]

    db = TuningDatabase(url, study)
    assert not [t for t in db.trials() if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    if kind == "journal":
        assert not os.path.exists(url.removeprefix("journal:") + ".lock")  # issue 20: nothing to stall the next run
    records = measured(db)
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)) and trials <= len(keys) <= trials + 2
    lost = {r.key for r in db.records() if r.status == "interrupted"}
    assert lost  # the victim had trials in flight; they were marked, not left running
    twice = [key for key, n in collections.Counter(k for k, _ in runs(log)).items() if n > 1]
    assert set(twice) <= lost  # only what the victim measured without recording it is measured again


def test_tune_parallel_runs_one_worker_per_gpu_on_one_study(tmp_path):
    log = str(tmp_path / "runs")
    settings = TuneSettings(
        strategy="random", trials=20, storage=f"sqlite:///{tmp_path / 'p.db'}", study="p", heartbeat=1
    )
    result = tune_parallel(
        TOY_OP, {"size": 64}, gpus=[0, 1], settings=settings,
        runner="tilesearch.testing.worker:synthetic_runner", runner_kwargs={"delay": 0.02, "log": log},
    )
    assert [w.error for w in result.processes] == [None, None]
    assert [w.gpu for w in result.processes] == [0, 1]
    keys = [key for key, _ in runs(log)]
    assert len(keys) == len(set(keys)) == result.measured_now == 20
    assert result.best and result.best[0].latency_ms == min(r.latency_ms for r in measured(TuningDatabase(
        settings.storage, "p")))


def test_tune_parallel_reports_a_worker_that_could_not_start(tmp_path):
    settings = TuneSettings(trials=4, storage=f"sqlite:///{tmp_path / 'p.db'}", study="p")
    result = tune_parallel(TOY_OP, {"size": 64}, gpus=[0], settings=settings,
                           runner="tilesearch.testing.worker:no_such_factory")
    assert result.processes[0].result is None and "no_such_factory" in result.processes[0].error


@pytest.mark.parametrize(
    "args, message",
    [
        (["worker", "op=gemm", "m=64", "n=64", "k=64"], "storage=URL"),
        (["worker", "op=gemm", "m=64", "n=64", "k=64", "storage=:memory:"], "storage=URL"),
        (["worker", "op=gemm", "m=64", "n=64", "k=64", "storage=sqlite:///x.db", "gpus=0,1"], "one tuning process on one GPU"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "workers=3", "gpus=0,1"], "one tuning process per GPU"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "gpus=0,0"], "distinct"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "gpus=a"], "device indices"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "gpus=0,1", "storage=:memory:"], "cannot be shared"),
    ],
)
def test_cli_rejects_bad_worker_settings(args, message, capsys):
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_tune_parallel_searches_only_the_given_knob_values(tmp_path):
    log = str(tmp_path / "runs")
    knobs = {"tile_a": (16, 32), "tile_b": (16,), "depth": (1, 2), "order": ("row",)}
    settings = TuneSettings(strategy="grid", trials=10, storage=f"sqlite:///{tmp_path / 'k.db'}", study="k")
    result = tune_parallel(TOY_OP, {"size": 64}, gpus=[0, 1], settings=settings, knobs=knobs,
                           runner="tilesearch.testing.worker:synthetic_runner", runner_kwargs={"log": log})
    configs = [r.config for r in measured(TuningDatabase(settings.storage, "k"))]
    assert result.measured_now == len(configs) == 4
    assert {(c["tile_a"], c["depth"]) for c in configs} == {(16, 1), (16, 2), (32, 1), (32, 2)}
