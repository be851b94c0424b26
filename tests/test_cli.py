import subprocess
import sys

import pytest

from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.tuner import tune


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "tilesearch.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["tune", "op=nosuch", "m=1"], "unknown op 'nosuch'; registered ops: "),
        (["tune", "op=gemm", "m=64", "n=64"], "needs k=..."),
        (["tune", "op=gemm", "m=-4", "n=64", "k=64"], "m=-4 must be >= 1"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "dtype=float8"], "dtype='float8' is not one of float16, bfloat16"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "colour=red"], "unknown key 'colour'; gemm takes m, n, k"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "strategy=annealing"], "unknown strategy 'annealing'"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "trials=many"], "trials='many' must be a int"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "trials=0"], "trials must be at least 1"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "runtime=k"], "runtime=k: gemm compiles m as a run-time value"),
        (["tune", "m=64"], "op=NAME is required"),
        (["tune", "op=gemm", "m"], "expected key=value"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["show", "op=gemm", "m=64", "n=64", "k=64"], "no study for gemm"),
        (["tune", "op=gemm", "m=64", "n=64", "k=64", "storage=results.db"], "not a storage URL"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    out = cli(*args)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilesearch: error: ") and message in lines[0], out.stderr


def test_tune_without_gpu_says_so(monkeypatch):
    import os

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = cli("tune", "op=gemm", "m=64", "n=64", "k=64", "trials=1", env=env)
    assert out.returncode == 2
    assert "no CUDA GPU" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_ops_lists_params_and_knobs():
    out = cli("ops")
    assert out.returncode == 0
    for text in ("gemm:", "param m: int >= 1 (required)", "knob  block_m: {64, 128, 256}", "knob  warp_policy", "valid"):
        assert text in out.stdout


def test_show_prints_best_table(tmp_path):
    import os

    storage = f"sqlite:///{tmp_path / 's.db'}"
    tune("gemm", {"m": 64, "n": 64, "k": 64}, runner=SyntheticRunner(), storage=storage, trials=5,
         strategy="random", progress=False, retime_margin=1)
    out = cli("show", "op=gemm", "m=64", "n=64", "k=64", f"storage={storage}", "top=3", env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "[replayed]" in out.stdout and "trials: 5 (ok: 5)" in out.stdout
    best, final = out.stdout.split("final re-time:")
    table = best.split("\n")
    header = next(line for line in table if "latency_ms" in line)
    assert "block_m" in header and "vs_baseline" in header and "95% interval" in header
    assert sum(1 for line in table if line.strip()[:1].isdigit()) == 3
    assert "tie set" in final and sum(1 for line in final.split("\n") if line.strip()[:1].isdigit()) == 5


def test_help_exits_zero_and_no_args_exits_2():
    assert cli("--help").returncode == 0
    assert cli().returncode == 2


def _tune_script(storage, stop_at_open):
    """A ``tune`` command line run in a child process that prints its exit code and the fork server's
    PID when the storage began to open (``-`` where it did not), each on a line."""
    return ("import sys\n"
            "from tilesearch import cli, database\n"
            "from tilesearch.workers import fork_server_pid\n"
            "seen = ['-']\n"
            "def opened(*args, **kwargs):\n"
            "    seen[0] = fork_server_pid()\n"
            f"    if {stop_at_open}: raise database.StorageError('the server does not answer')\n"
            "database.rdb_storage = opened\n"
            f"sys.argv = ['tilesearch', 'tune', 'op=gemm', 'm=64', 'n=64', 'k=64', 'trials=1', 'storage={storage}']\n"
            "print(cli.main())\n"
            "print(seen[0])\n")


def test_tune_starts_the_compile_pools_process_before_the_storage_opens_and_stops_it_on_failure(tmp_path):
    """The compile pool's process imports TileLang while the storage opens (SQLAlchemy's imports),
    not after; a storage that then fails to open leaves no process behind."""
    from test_workers import alive

    out = subprocess.run([sys.executable, "-c", _tune_script(f"sqlite:///{tmp_path / 's.db'}", True)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": __import__("os").path.dirname(__file__)})
    code, pid = out.stdout.split()[-2:]
    assert code == "2" and "the server does not answer" in out.stderr, out.stderr[-2000:]
    assert pid != "None", "no fork server ran when the storage began to open"
    assert not alive(int(pid))  # stopped as the command exited


def test_tune_on_a_file_that_is_no_database_starts_nothing(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"these bytes are not an SQLite database")
    out = subprocess.run([sys.executable, "-c", _tune_script(f"sqlite:///{bad}", False)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    code, pid = out.stdout.split()[-2:]
    assert code == "2" and "is not an SQLite database" in out.stderr, out.stderr[-2000:]
    assert pid == "-"  # the storage never began to open
    assert bad.read_bytes() == b"these bytes are not an SQLite database"
