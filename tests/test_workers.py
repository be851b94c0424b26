from tilesearch.workers import IsolatedWorker

CALLS = "tilesearch.testing.calls"


def alive(pid):
    """Whether process ``pid`` runs (a zombie has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_value_comes_back():
    with IsolatedWorker() as worker:
        result = worker.call(f"{CALLS}:echo", {"a": [1, 2]}, timeout=60)
    assert result.ok and result.value == {"a": [1, 2]}


def test_exception_is_data_and_worker_survives():
    with IsolatedWorker() as worker:
        first = worker.pid
        result = worker.call(f"{CALLS}:fail", "kaput", timeout=60)
        assert not result.ok and "RuntimeError: kaput" in result.error
        assert worker.call(f"{CALLS}:pid", timeout=60).value == first


def test_crash_is_reported_and_worker_restarts():
    with IsolatedWorker(name="w") as worker:
        first = worker.call(f"{CALLS}:pid", timeout=60).value
        result = worker.call(f"{CALLS}:crash", 7, timeout=60)
        assert result.died and "exit code 7" in result.error
        again = worker.call(f"{CALLS}:echo", 1, timeout=60)
        assert again.ok and worker.call(f"{CALLS}:pid", timeout=60).value != first


def test_hang_is_killed_after_timeout_and_worker_restarts():
    with IsolatedWorker() as worker:
        result = worker.call(f"{CALLS}:hang", timeout=1.0)
        assert result.timed_out and not result.ok
        assert worker.restarts == 1
        assert worker.call(f"{CALLS}:echo", "alive", timeout=60).value == "alive"


def test_environment_reaches_the_child():
    with IsolatedWorker(env={"TILESEARCH_TEST_VAR": "42"}) as worker:
        result = worker.call("os:getenv", "TILESEARCH_TEST_VAR", timeout=60)
    assert result.value == "42"


def test_a_nice_worker_yields_the_cpu_and_so_do_its_compilers():
    """The compile pool runs at a lower CPU priority than the measuring worker (builder.local)."""
    import os

    from tilesearch.builder.local import COMPILE_NICE, LocalBuilder

    ours = os.nice(0)
    with IsolatedWorker(nice=3) as worker:
        assert worker.call("os:nice", 0, timeout=60).value == min(ours + 3, 19)
        shell = worker.call("subprocess:check_output", ["sh", "-c", "ps -o ni= -p $$"], timeout=60).value
        assert int(shell) == min(ours + 3, 19)
    builder = LocalBuilder(workers=2)
    try:
        assert COMPILE_NICE > 0 and [w.nice for w in builder._all] == [COMPILE_NICE] * 2
    finally:
        builder.close()


def test_a_stopped_worker_runs_its_exit_handlers_and_exits_cleanly(tmp_path):
    # the worker skips Python's module teardown on the way out, not what libraries registered
    marker = tmp_path / "cleaned"
    worker = IsolatedWorker()
    worker.call(f"{CALLS}:on_exit_write", str(marker), timeout=60)
    proc = worker._proc
    worker.stop()
    assert proc.exitcode == 0 and marker.exists()


def test_a_forked_worker_starts_where_a_spawned_one_would(tmp_path, monkeypatch):
    # the fork server started once, with the environment of then; a worker forked later must get
    # the parent's environment, path and folder of its own start, as a spawned one does
    import os
    import sys

    with IsolatedWorker(forked=True) as early:
        early.call(f"{CALLS}:pid", timeout=60)
    monkeypatch.setenv("TILESEARCH_TEST_VAR", "later")
    monkeypatch.delenv("TILESEARCH_TEST_GONE", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with IsolatedWorker(forked=True, env={"TILESEARCH_TEST_OWN": "1"}) as forked, IsolatedWorker() as spawned:
        got = forked.call(f"{CALLS}:where", timeout=60).value
        assert spawned.call(f"{CALLS}:where", timeout=60).value[1:] == got[1:]
    env, path, cwd = got
    assert env["TILESEARCH_TEST_VAR"] == "later" and env["TILESEARCH_TEST_OWN"] == "1"
    assert "TILESEARCH_TEST_GONE" not in env
    assert path == sys.path and cwd == os.getcwd() == str(tmp_path)


def test_the_compile_pool_is_forked_from_a_process_that_has_imported_tilelang():
    import os

    from tilesearch.builder.local import LocalBuilder
    from tilesearch.workers import preload

    preload(["tilesearch.builder.warm"])  # as the compile pool asks: the first list holds
    with IsolatedWorker(forked=True) as forked, IsolatedWorker() as spawned:
        assert forked.call(f"{CALLS}:imported", "tilelang", timeout=120).value  # before any call imported it
        assert not spawned.call(f"{CALLS}:imported", "tilelang", timeout=60).value
    builder = LocalBuilder(workers=1)
    try:
        worker = builder._idle.get(timeout=120)  # once warmed up: one call at a time
        builder._idle.put(worker)
        assert worker.forked and worker.call("os:getppid", timeout=60).value != os.getpid()
    finally:
        builder.close()


def test_a_killed_tuning_process_leaves_no_compile_worker_nor_fork_server(tmp_path):
    # SIGKILL runs no handler: the forked workers must see their pipes close, the fork server its parent go
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "pool.py"
    script.write_text(
        "import sys, time\n"
        "from tilesearch.builder.local import LocalBuilder\n"
        "if __name__ == '__main__':\n"
        "    builder = LocalBuilder(workers=1)\n"
        "    worker = builder._idle.get(timeout=300)\n"
        "    print(worker.pid, worker.call('os:getppid', timeout=60).value, flush=True)\n"
        "    time.sleep(600)\n")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in child.stdout.readline().split()]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert len(pids) == 2 and pids[1] != child.pid  # the worker and the fork server it was forked from

    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in pids)


def test_a_fork_server_started_early_and_never_used_stops_with_its_process(tmp_path):
    # a finished study answered from its storage forks no compile worker: the server started
    # early (importing TileLang for seconds) must not outlive the command
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "pid"
    script = ("import sys\n"
              "from tilesearch.builder.local import start_early\n"
              "from tilesearch.workers import fork_server_pid\n"
              "start_early()\n"
              "open(sys.argv[1], 'w').write(str(fork_server_pid()))\n")
    # no pipes: the server inherits the process's descriptors, and a pipe would wait for it
    done = subprocess.run([sys.executable, "-c", script, str(pid_file)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 2  # stopped at once, not after finishing its imports
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
