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
