"""Spare worker processes for the final re-time (issue 17), on the CPU runner: started in the
background before the search measures, used by the re-time (never for a search trial), used
once, replaced for the next problem of a shared runner, taking over from a crashed measuring
worker, and stopped on every way out (close, an error, a signal). A run with ``retime=0`` starts
none. Which process warmed up, measured and re-timed comes from the CPU runner's call log."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tilesearch import shutdown, tuner
from tilesearch.records import Candidate, Status
from tilesearch.runner import NoDeviceError
from tilesearch.runner.measure import MeasureSettings
from tilesearch.space import Categorical, Space
from tilesearch.target import Target
from tilesearch.testing.cpu import SLEEPY_CPU_OP, CpuRunner
from tilesearch.testing.faulty import FAULTY_CPU_OP

SPACE = Space([Categorical("fault", ("none",)), Categorical("block", (256, 512)), Categorical("threads", (128,))])
TARGET = Target.from_arch("sm_90a", gpu="cpu")


def calls(log):
    """``(what, pid)`` per line of a CPU runner's log, in order."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [(what, int(pid)) for what, pid in (line.split() for line in f)]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead too
        return f.read().split(")")[-1].split()[0] != "Z"


class Watched(CpuRunner):
    """Remembers the spare processes there were at each search trial."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spares_at_run = []

    def run(self, candidate, incumbent=None):
        self.spares_at_run.append(len(self._spares))
        return super().run(candidate, incumbent)


def wait_ready(runner, count, timeout=120):
    deadline = time.monotonic() + timeout
    while sum(s.ready for s in runner._spares) < count:
        assert time.monotonic() < deadline, "spares did not warm up"
        time.sleep(0.05)


def test_the_final_retime_runs_in_spares_started_before_the_search(tmp_path):
    log, storage = str(tmp_path / "calls.log"), f"sqlite:///{tmp_path / 'db.sqlite'}"
    with Watched(timeout=60, log=log) as runner:
        result = tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=runner, strategy="grid", trials=2,
                            retime=2, storage=storage, progress=False)
        spares = runner.spare_pids
        measuring = runner.worker_pid
    assert runner.spares_at_run == [2, 2]  # started before the first trial was timed
    assert spares == []  # used by the re-time, then stopped
    seen = calls(log)
    measured = {pid for what, pid in seen if what == "measure"}
    retimed = [pid for what, pid in seen if what == "together"]
    assert measured == {measuring} and len(set(retimed)) == len(retimed) >= 2  # one process each
    assert not measured & set(retimed)  # fresh: no search trial ran in them
    for pid in retimed:  # each warmed up before it timed
        assert seen.index(("info", pid)) < seen.index(("together", pid))
        assert not alive(pid)
    assert result.final is not None and result.final.together
    assert {"spare: warm-up (background)", "spare: wait"} <= set(result.phases)
    from tilesearch.phases import table

    line = next(x for x in table(result.phases, result.wall_s).splitlines() if x.startswith("spare: warm-up"))
    assert line.endswith("-")  # background: no share of the wall time


def held_warm_up(runner_class, tmp_path, monkeypatch):
    """A started runner of ``runner_class`` whose measuring worker's warm-up waits for the
    returned gate file (the CPU runner's stand-in for a slow import): ``(runner, log, gate)``."""
    from tilesearch.testing.cpu import WARM_GATE

    log, gate = str(tmp_path / "calls.log"), tmp_path / "gate"
    monkeypatch.setenv(WARM_GATE, str(gate))
    runner = runner_class(timeout=60, log=log)
    assert runner.start() == TARGET
    assert runner._warming is not None and runner._warming.running
    return runner, log, gate


def test_the_measuring_worker_reports_its_gpu_before_it_warms_up_and_times_only_after(tmp_path, monkeypatch):
    # start() returns the GPU's facts while TileLang's import (here: a gate file) is still
    # running in the worker, so the first configurations compile meanwhile; the first trial waits
    runner, log, gate = held_warm_up(CpuRunner, tmp_path, monkeypatch)
    try:
        pid = runner.worker_pid
        assert calls(log) == [("info", pid)]  # the facts, not the warm-up
        gate.touch()
        result = runner.run(Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "none", "block": 256, "threads": 128},
                                      TARGET, FAULTY_CPU_OP))
        assert result.status == Status.OK
        assert calls(log) == [("info", pid), ("warm", pid), ("measure", pid)]
        assert "worker: warm-up (background)" in runner.phases()
    finally:
        gate.touch()
        runner.close()
    assert not alive(pid)


class Quick(Watched):
    """A CPU runner with a quick start: the facts read in the tuning process (the driver's, on a GPU)."""

    driver_fn = "tilesearch.testing.cpu:driver_facts"


def test_a_quick_start_returns_the_facts_before_the_worker_has_started_and_checks_them_there(tmp_path, monkeypatch):
    # the tuning process proposes and compiles while the whole worker start (here held by a gate
    # file) runs; spares asked for meanwhile start only after it, and the first trial waits for it
    runner, log, gate = held_warm_up(Quick, tmp_path, monkeypatch)
    try:
        assert calls(log) == []
        runner.expect_retime()
        assert runner.spare_pids == []  # not beside the measuring worker's start
        gate.touch()
        result = runner.run(Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "none", "block": 256, "threads": 128},
                                      TARGET, FAULTY_CPU_OP))
        assert result.status == Status.OK
        pid = runner.worker_pid
        assert [c for c in calls(log) if c[1] == pid] == [("warm", pid), ("info", pid), ("measure", pid)]
        assert len(runner.spare_pids) == 2  # started once the measuring worker was up
    finally:
        gate.touch()
        runner.close()
    assert not alive(pid)


class SlowExit(CpuRunner):
    """A CPU runner whose re-time processes take seconds to exit (a CUDA context torn down)."""

    together_fn = "test_spares:together_then_slow_exit"


def together_then_slow_exit(*args):
    import atexit

    from tilesearch.testing.cpu import measure_together

    atexit.register(time.sleep, 3)
    return measure_together(*args)


def test_the_final_retime_goes_on_while_its_processes_exit_and_close_ends_them(tmp_path):
    # process 2 of the re-time starts while process 1 exits; nothing is left behind
    runner = SlowExit(timeout=60, settings=MeasureSettings(final_processes=2))
    try:
        runner.start()
        results = runner.retime([Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "none", "block": 256, "threads": 128},
                                           TARGET, FAULTY_CPU_OP)])
        # one configuration: two processes, whether or not their CPU timings agree
        assert [r.status for r in results] == [Status.OK] and results[0].extra["processes"] == 2
        exiting = [w.pid for w in runner._retired]
        assert len(exiting) == 2 and alive(exiting[-1])  # asked to exit, not waited for: still exiting (3 s)
        assert {"final: process", "final: load and check", "final: settle and time"} <= set(runner.phases())
    finally:
        runner.close()
    assert not any(alive(pid) for pid in exiting)


def test_a_quick_start_starts_the_worker_before_it_reads_the_driver(tmp_path, monkeypatch):
    # the worker's start (seconds of importing torch on a GPU host) runs beside the driver's read
    class Early(Quick):
        driver_fn = "test_spares:facts_once_a_worker_runs"

    runner, _, gate = held_warm_up(Early, tmp_path, monkeypatch)
    try:
        assert SEEN_CHILDREN == [runner.worker_pid]
    finally:
        gate.touch()
        runner.close()


SEEN_CHILDREN: list = []


def facts_once_a_worker_runs(env):
    """The CPU driver's facts, read once the tuning process has a child process (at most 10 s)."""
    import multiprocessing

    from tilesearch.testing.cpu import driver_facts

    deadline = time.monotonic() + 10
    while not multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.01)
    SEEN_CHILDREN[:] = [p.pid for p in multiprocessing.active_children()]
    return driver_facts(env)


def test_a_quick_start_whose_facts_the_worker_contradicts_stops_before_measuring(tmp_path):
    class Wrong(Quick):
        driver_fn = "test_spares:wrong_facts"

    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with pytest.raises(NoDeviceError, match=r"differ from the driver's in num_sms .*TILESEARCH_QUICK_START=0"):
        tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=Wrong(timeout=60), strategy="grid", trials=2,
                   retime=0, storage=storage, progress=False)


def wrong_facts(env):
    from tilesearch.testing.cpu import driver_facts

    return {**driver_facts(env), "num_sms": 7}


def test_a_quick_start_tunes_as_the_worker_would(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with Quick(timeout=60) as runner:
        quick = tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=runner, strategy="grid", trials=2,
                           retime=2, storage=storage, progress=False)
    with Watched(timeout=60) as runner:
        again = tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=runner, strategy="grid", trials=2,
                           retime=2, storage=storage, progress=False)
    assert quick.study == again.study and again.measured_now == 0  # the same study: the same facts
    assert quick.statuses == {"ok": 2} and quick.final is not None and quick.final.together


def test_closing_during_the_warm_up_leaves_no_process(tmp_path, monkeypatch):
    from tilesearch.testing.cpu import WARM_GATE

    gate = tmp_path / "gate"
    monkeypatch.setenv(WARM_GATE, str(gate))
    runner = CpuRunner(timeout=60)
    runner.start()
    pid = runner.worker_pid
    threading.Timer(0.5, gate.touch).start()  # the import ends while close() waits for it
    runner.close()
    assert runner._warming is None and not alive(pid) and runner.worker_pid is None


def test_retime_zero_starts_no_spare(tmp_path):
    log = str(tmp_path / "calls.log")
    with Watched(timeout=60, log=log) as runner:
        tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=runner, strategy="grid", trials=2, retime=0,
                   storage=f"sqlite:///{tmp_path / 'db.sqlite'}", progress=False)
        assert runner.spare_pids == [] and runner.spares_at_run == [0, 0]
        measuring = runner.worker_pid
    assert {pid for _, pid in calls(log)} == {measuring}


def test_a_shared_runner_gets_new_spares_for_each_problem(tmp_path):
    """As a range's sizes share one runner: each problem's re-time in spares of its own, started
    for it; the measuring worker stays; nothing is left running."""
    log, storage = str(tmp_path / "calls.log"), f"sqlite:///{tmp_path / 'db.sqlite'}"
    retimed = []
    with Watched(timeout=60, log=log) as runner:
        for n in (1 << 12, 1 << 13):
            before = len(calls(log))
            tuner.tune(FAULTY_CPU_OP, {"n": n}, space=SPACE, runner=runner, strategy="grid", trials=2, retime=2,
                       storage=storage, progress=False)
            retimed.append({pid for what, pid in calls(log)[before:] if what == "together"})
            assert runner.spare_pids == []
        measuring = runner.worker_pid
    assert runner.spares_at_run == [2, 2, 2, 2]
    assert all(len(pids) >= 2 for pids in retimed) and not retimed[0] & retimed[1]
    assert {pid for what, pid in calls(log) if what == "measure"} == {measuring}
    assert not any(alive(pid) for _, pid in calls(log))


def test_a_ready_spare_replaces_a_crashed_worker_and_is_replaced(tmp_path):
    runner = CpuRunner(timeout=60)
    try:
        runner.start()
        runner.expect_retime()
        wait_ready(runner, 2)
        spares, crashed = runner.spare_pids, runner.worker_pid
        bad = Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "out_of_bounds", "block": 256, "threads": 128},
                        TARGET, FAULTY_CPU_OP)
        assert runner.run(bad).status == Status.RUNTIME_ERROR
        assert runner.worker_pid == spares[0] and not alive(crashed)
        assert runner.spare_pids[0] == spares[1] and len(runner._spares) == 2  # one started in its place
        good = Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "none", "block": 256, "threads": 128}, TARGET,
                         FAULTY_CPU_OP)
        assert runner.run(good).status == Status.OK
        assert runner.phases()["spare: warm-up (background)"] > 0 and runner.phases() == {}  # drained
        wait_ready(runner, 2)
        running = [*runner.spare_pids, runner.worker_pid]
    finally:
        runner.close()
    assert len(running) == 3 and not any(alive(pid) for pid in running)
    assert not [t for t in threading.enumerate() if t.name.endswith("-warm-up")]


def test_close_stops_spares_even_while_they_warm_up():
    runner = CpuRunner(timeout=60)
    runner.expect_retime()  # not even started: close at once
    deadline = time.monotonic() + 60
    while len(runner.spare_pids) < 2:  # their processes exist, their imports go on
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pids = runner.spare_pids
    runner.close()
    assert not any(alive(pid) for pid in pids)
    assert not [t for t in threading.enumerate() if t.name.endswith("-warm-up")]


class Interrupting(Watched):
    """Interrupted (as by Ctrl-C) during its second search trial, once its spares are up."""

    made = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Interrupting.made.append(self)

    def run(self, candidate, incumbent=None):
        if len(self.spares_at_run) == 1:
            wait_ready(self, 2)
            self.pids = [*self.spare_pids, self.worker_pid]
            raise shutdown.Interrupted(signal.SIGINT)
        return super().run(candidate, incumbent)


def test_a_tune_interrupted_in_its_search_leaves_no_spare(tmp_path, monkeypatch):
    monkeypatch.setattr(tuner, "make_runner", lambda settings: Interrupting(timeout=60))
    with pytest.raises(shutdown.Interrupted):
        tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=None, strategy="grid", trials=2, retime=2,
                   storage=f"sqlite:///{tmp_path / 'db.sqlite'}", progress=False)
    (runner,) = Interrupting.made
    assert len(runner.pids) == 3 and not any(alive(pid) for pid in runner.pids)


SCRIPT = textwrap.dedent("""
    import sys, time
    from tilesearch import shutdown, tuner
    from tilesearch.space import Categorical, Space
    from tilesearch.testing.cpu import SLEEPY_CPU_OP, CpuRunner

    storage, when, sleep_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])

    class Telling(CpuRunner):
        \"\"\"Prints the PIDs of its processes once its spares are ready (search) or one is taken (re-time).\"\"\"

        def run(self, candidate, incumbent=None):
            while when == "search" and sum(s.ready for s in self._spares) < 2:
                time.sleep(0.05)
            if when == "search":
                print(*self.spare_pids, self.worker_pid, flush=True)
            return super().run(candidate, incumbent)

        def _take_fresh(self):
            worker = super()._take_fresh()
            if when == "retime":
                print(worker.pid, *self.spare_pids, self.worker_pid, flush=True)
            return worker

    shutdown.install()
    tuner.make_runner = lambda settings: Telling(timeout=60)
    space = Space([Categorical("sleep_ms", (sleep_ms,)), Categorical("copy", ("a",))])
    try:
        tuner.tune(SLEEPY_CPU_OP, {"n": 1024}, space=space, strategy="grid", trials=1, retime=1,
                   storage=storage, progress=False)
    except shutdown.Interrupted:
        sys.exit(shutdown.exit_code())
""")


@pytest.mark.parametrize("signum, when, sleep_ms", [(signal.SIGINT, "search", 10000), (signal.SIGTERM, "search", 10000),
                                                    (signal.SIGINT, "retime", 500)])
def test_a_signal_stops_every_spare(tmp_path, signum, when, sleep_ms):
    """In the search (a trial of 10 s kernels), or in the final re-time (0.5 s kernels: 8 s of its
    rounds), once a spare has been taken from the pool."""
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'db.sqlite'}", when, str(sleep_ms)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 3 and all(alive(pid) for pid in pids), proc.stderr.read()[-2000:] if proc.poll() else pids
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err[-2000:]
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:  # reaped by init
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


class InterruptedInRetime(CpuRunner):
    """Interrupted (as by Ctrl-C) inside the call that times the re-time's first process. No real
    signal: a pytest process where ``tilesearch.cli.main`` ran has tilesearch's handlers, which
    remember a signal for good (tilesearch.shutdown), and would stop every later tune."""

    def _take_fresh(self):
        worker = super()._take_fresh()
        self.taken = worker.pid

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        worker.call = interrupted
        return worker


def test_a_spare_taken_by_an_interrupted_retime_is_stopped_there(tmp_path):
    """Once taken from the pool, close() no longer knows it: the re-time itself must stop it."""
    runner = InterruptedInRetime(timeout=60)
    with pytest.raises(KeyboardInterrupt):
        tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=runner, strategy="grid", trials=1, retime=1,
                   storage=f"sqlite:///{tmp_path / 'db.sqlite'}", progress=False)
    assert not alive(runner.taken)  # before close()
    runner.close()


def test_a_range_shares_one_runner_and_each_size_retimes_in_spares_of_its_own(tmp_path, monkeypatch):
    """tune_range gives all its sizes one runner (tilesearch.range_tuner._Stages): each size's
    final re-time runs in spares started for it, none of which measured a search trial."""
    from tilesearch import range_tuner
    from tilesearch.range_tuner import RangeSettings, tune_range
    from tilesearch.tuner import TuneSettings

    log, made = str(tmp_path / "calls.log"), []

    def runner(settings):
        made.append(Watched(timeout=60, log=log))
        return made[-1]

    monkeypatch.setattr(range_tuner, "make_runner", runner)
    settings = TuneSettings(strategy="grid", trials=2, retime=2, progress=False,
                            storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    result = tune_range(SLEEPY_CPU_OP, {"n": "1..4096"}, settings=settings, ranges=RangeSettings(sizes=3, heldout=0, probes=0, refine=0))
    assert len(made) == 1 and len(result.studies) == 3
    assert set(made[0].spares_at_run) == {2}  # each size's spares started before its search
    seen = calls(log)
    measured = {pid for what, pid in seen if what == "measure"}
    retimed = [pid for what, pid in seen if what == "together"]
    assert len(measured) == 1 and not measured & set(retimed)
    assert len(retimed) == len(set(retimed)) >= 2 * 3  # each size's re-time in processes of its own
    assert not any(alive(pid) for _, pid in seen)


MEASURING = textwrap.dedent("""
    import multiprocessing, os, signal, sys, threading, time
    from tilesearch import tuner
    from tilesearch.space import Categorical, Space
    from tilesearch.testing.cpu import SLEEPY_CPU_OP, CpuRunner

    measuring, made = threading.Event(), []

    class Slow(CpuRunner):
        def run(self, candidate, incumbent=None):
            self.pid = self.worker_pid
            measuring.set()
            return super().run(candidate, incumbent)

    def interrupt():
        measuring.wait(120)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: it lands in the tuning thread, waiting on the measurement

    if __name__ == "__main__":
        tuner.make_runner = lambda settings: made.append(Slow(timeout=60)) or made[-1]
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            tuner.tune(SLEEPY_CPU_OP, {"n": 1024}, space=Space([Categorical("sleep_ms", (3000,)), Categorical("copy", ("a",))]),
                       strategy="grid", trials=1, retime=0, storage=sys.argv[1], progress=False)
        except KeyboardInterrupt:
            time.sleep(2)  # the measuring thread's call has failed by now
            runner = made[0]
            print("measured in", runner.pid, "now", runner.worker_pid,
                  "children", [p.name for p in multiprocessing.active_children()], flush=True)
""")


def test_a_tune_interrupted_while_the_runner_measures_leaves_no_worker(tmp_path):
    # the runner measures in a thread of its own: tune closes the runner on Ctrl-C, and the
    # measurement's failed call must not start a new worker process (it did, while close() only
    # stopped the measuring worker)
    script = tmp_path / "measuring.py"
    script.write_text(MEASURING)
    done = subprocess.run([sys.executable, str(script), f"sqlite:///{tmp_path / 'db.sqlite'}"], capture_output=True,
                          text=True, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith("measured in")), None)
    assert line is not None, done.stderr[-2000:]
    pid = int(line.split()[2])
    assert line.endswith("now None children []") and not alive(pid), line


class NotesSettle(CpuRunner):
    """A CPU runner whose re-time processes note the settle they were given."""

    together_fn = "test_spares:together_noting_settle"


def together_noting_settle(candidates, settings, peers=()):
    from tilesearch.testing.cpu import measure_together

    with open(os.environ["SETTLE_LOG"], "a") as f:
        f.write(f"{settings.settle_ms}\n")
    return measure_together(candidates, settings, peers)


def retime_settles(tmp_path, monkeypatch, ready):
    """The settle each of a 3-process re-time's processes was given; ``ready``: its spares warmed
    up before it starts, else the runner pauses 0.2 s between processes (:data:`RESETTLE_WITHIN_S`
    made shorter than that, so that no test hangs on a slow machine's start), which it can only
    where it did not prepare them side by side first (as for processes a disagreement adds)."""
    from tilesearch.runner import local

    monkeypatch.setenv("SETTLE_LOG", str(tmp_path / "settle"))
    if not ready:
        monkeypatch.setattr(local, "RESETTLE_WITHIN_S", 0.1)
        take = local.LocalRunner._take_fresh
        monkeypatch.setattr(local.LocalRunner, "_take_fresh", lambda self: (time.sleep(0.2), take(self))[1])
    runner = NotesSettle(timeout=60, settings=MeasureSettings(final_processes=3))
    if not ready:
        runner.prepare_fn = None
    try:
        runner.start()
        if ready:
            runner.expect_retime()
            deadline = time.monotonic() + 120
            while not all(s.ready for s in runner._spares) and time.monotonic() < deadline:
                time.sleep(0.05)
        runner.retime([Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "none", "block": 256, "threads": 128},
                                 TARGET, FAULTY_CPU_OP)])
    finally:
        runner.close()
    # one configuration: three processes, whether or not their CPU timings agree
    return [float(x) for x in (tmp_path / "settle").read_text().split()]


def test_a_retimes_later_processes_settle_shorter_when_they_follow_at_once(tmp_path, monkeypatch):
    # the first process may follow idle time; the next follow the previous one's rounds at once
    from tilesearch.runner.measure import FINAL_RESETTLE_MS, FINAL_SETTLE_MS

    assert retime_settles(tmp_path, monkeypatch, ready=True) == [FINAL_SETTLE_MS, FINAL_RESETTLE_MS, FINAL_RESETTLE_MS]
    assert FINAL_RESETTLE_MS < FINAL_SETTLE_MS


def test_a_process_that_follows_a_pause_settles_in_full(tmp_path, monkeypatch):
    from tilesearch.runner.measure import FINAL_SETTLE_MS

    assert retime_settles(tmp_path, monkeypatch, ready=False) == [FINAL_SETTLE_MS] * 3


class Disagreeing(CpuRunner):
    """A CPU runner whose re-time processes never agree: each reports the kernel slower by its seed."""

    together_fn = "test_spares:together_disagreeing"


def together_disagreeing(candidates, settings, peers=()):
    from dataclasses import replace

    from tilesearch.testing.cpu import measure_together

    with open(os.environ["CALLED_LOG"], "a") as f:
        f.write(f"{time.monotonic()}\n")
    shift = 1.0 + settings.seed
    return [replace(r, speedup=None, speedup_low=None, speedup_high=None, latency_ms=shift,
                    latency_low=shift - 0.01, latency_high=shift + 0.01) for r in measure_together(candidates, settings, peers)]


def test_once_processes_disagree_every_further_one_starts_at_once(tmp_path, monkeypatch):
    # one after another, each start (6 s on the H100 host) came between two processes
    from tilesearch.runner import local
    from tilesearch.runner.pool import MAX_PROCESSES

    monkeypatch.setenv("CALLED_LOG", str(tmp_path / "called"))
    started = []
    spare = local.LocalRunner._spare
    monkeypatch.setattr(local.LocalRunner, "_spare", lambda self: (started.append(time.monotonic()), spare(self))[1])
    runner = Disagreeing(timeout=60, settings=MeasureSettings(final_processes=2))
    try:
        runner.start()
        results = runner.retime([Candidate("faulty_cpu", {"n": 1 << 12}, {"fault": "none", "block": block, "threads": 128},
                                           TARGET, FAULTY_CPU_OP) for block in (256, 128)])
    finally:
        runner.close()
    called = [float(x) for x in (tmp_path / "called").read_text().split()]
    assert results[0].extra["processes"] == len(called) == MAX_PROCESSES
    assert len(started) == MAX_PROCESSES - 2 and all(t < called[2] for t in started)  # both before process 3 ran


def test_one_configuration_alone_is_timed_in_the_usual_processes_even_when_they_disagree(tmp_path, monkeypatch):
    # no choice rests on them: more processes would only narrow its interval (README's main command
    # re-timed one configuration in four processes in three of five H100 runs, 14-16.5 s against 5)
    monkeypatch.setenv("CALLED_LOG", str(tmp_path / "called"))
    runner = Disagreeing(timeout=60, settings=MeasureSettings(final_processes=2))
    try:
        runner.start()
        [result] = runner.retime([Candidate("faulty_cpu", {"n": 1 << 12},
                                            {"fault": "none", "block": 256, "threads": 128}, TARGET, FAULTY_CPU_OP)])
    finally:
        runner.close()
    assert result.extra["processes"] == len((tmp_path / "called").read_text().split()) == 2


def test_the_retime_processes_are_prepared_side_by_side_before_any_times(tmp_path):
    # each of the re-time's first processes loads and checks its candidates (prepare) before the
    # first of them times, and then times what it prepared, on its own seed
    log, storage = str(tmp_path / "calls.log"), f"sqlite:///{tmp_path / 'db.sqlite'}"
    with CpuRunner(timeout=60, log=log) as runner:
        result = tuner.tune(FAULTY_CPU_OP, {"n": 1 << 12}, space=SPACE, runner=runner, strategy="grid", trials=2,
                            retime=2, storage=storage, progress=False)
    seen = calls(log)
    prepared = [pid for what, pid in seen if what == "prepare"]
    retimed = [pid for what, pid in seen if what == "together"]
    assert len(prepared) == 2 and sorted(retimed[:2]) == sorted(prepared)  # prepared in either order
    first = seen.index(("together", retimed[0]))
    assert all(seen.index(("prepare", pid)) < first for pid in prepared)
    for pid in prepared:
        assert seen.index(("ready", pid)) == seen.index(("together", pid)) - 1
    assert "final: prepare (side by side)" in result.phases
    assert result.final is not None and result.final.together
