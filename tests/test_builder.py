"""Lowering and nvcc compilation of real GEMM kernels for sm_90a, on a machine without a GPU."""

import time

import pytest

from tilesearch.builder import LocalBuilder
from tilesearch.records import Candidate
from tilesearch.target import Target

pytestmark = pytest.mark.nvcc

H100 = Target.from_arch("sm_90a")
BASE = dict(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=8, warp_policy="square")


def gemm(m, n, k, dtype="float16", layout="nn", **knobs):
    return Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), {**BASE, **knobs}, H100)


def test_compiles_gemm_configs_in_parallel_for_sm90a():
    candidates = [
        gemm(1024, 1024, 1024),
        gemm(4097, 4095, 129, dtype="bfloat16", block_m=64, warp_policy="full_col"),
        gemm(1000, 3000, 500, layout="nt", block_n=256, threads=256, num_stages=2, panel_size=0),
    ]
    with LocalBuilder(workers=2, timeout=600) as builder:
        results = [f.result() for f in [builder.submit(c) for c in candidates]]
    for result in results:
        assert result.ok, result.error
        assert result.compile_s > 0


def test_kernel_source_uses_hopper_instructions():
    from search_spaces.gemm import GemmOp

    op = GemmOp()
    problem = op.problem(m=1024, n=1024, k=1024)
    source = op.build(problem, BASE, H100).get_kernel_source()
    assert "wgmma" in source  # Hopper warp-group matrix instructions
    assert "tma_load" in source  # bulk tensor copies


def test_a_failed_compile_is_a_record():
    # 96 threads is not a whole warp group: TileLang rejects it
    with LocalBuilder(workers=1, timeout=600) as builder:
        result = builder.submit(gemm(256, 256, 256, threads=96)).result()
    assert not result.ok and not result.timed_out
    assert result.error


def test_a_slow_compile_times_out_and_the_builder_goes_on():
    with LocalBuilder(workers=1, timeout=0.5) as builder:
        slow = builder.submit(gemm(2048, 2048, 2048, block_k=64)).result()
        assert not slow.ok and slow.timed_out
        builder.timeout = 600
        assert builder.submit(gemm(512, 512, 512)).result().ok


def test_a_compile_reports_the_share_spent_in_compiler_processes(tmp_path, monkeypatch):
    """Where one configuration's compile time goes (the fast-tuning issue): lowering in Python, or
    nvcc and the host compiler; from an empty TileLang cache, so the compilers really run."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    with LocalBuilder(workers=1, timeout=600) as builder:
        result = builder.submit(gemm(640, 384, 192)).result()
    assert result.ok, result.error
    assert 0 < result.tools_s < result.compile_s


def test_a_compile_pool_closed_while_its_workers_start_closes_cleanly():
    # tune closes the pool at once when the runner cannot start; its threads were still
    # starting worker processes, and closing one half-started raised instead of the runner's error
    for _ in range(3):
        builder = LocalBuilder(workers=2, timeout=60)
        builder.close()
        time.sleep(1.0)  # the pool's threads have run by now: none may have started a process
        assert all(worker.pid is None for worker in builder._all)


def test_a_pool_closed_before_its_first_fork_stops_the_fork_server_importing(tmp_path):
    # tune on a machine without a GPU closes the pool at once: its workers' starts waited for the
    # fork server's TileLang import (seconds); the server is stopped instead
    import os
    import subprocess
    import sys

    # checked while the process runs: once it exits, an unstopped server would exit too. The server
    # also imports a module that takes 30 s, so it is surely still importing when the pool closes
    # (TileLang's import alone may end first on a fast host). A start under way as the pool closed
    # began a new server after the stop, which this caught in 2 of 9 runs (workers.no_fork_server)
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(30)\n")
    script = ("import time\n"
              "from test_workers import alive\n"
              "from tilesearch.builder import local\n"
              "from tilesearch.builder.local import LocalBuilder, start_early\n"
              "from tilesearch.workers import fork_server_pid\n"
              "local.WARM_MODULES = [*local.WARM_MODULES, 'slow_import']\n"
              "start_early()  # as tune does\n"
              "builder = LocalBuilder(workers=2)\n"
              "builder.close()\n"
              "time.sleep(0.5)\n"
              "print('alive' if alive(fork_server_pid()) else 'stopped')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": f"{os.path.dirname(__file__)}:{tmp_path}"})  # test_workers, slow_import
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "stopped"  # exited (a zombie until reaped), not importing on
