"""experiments/einsum_sum_bench.py replot=: the table, plot and verdict of a recorded run, without a
GPU; the runs recorded before the shared experiment runner still load."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "einsum_sum_bench.py"
PNG = b"\x89PNG\r\n\x1a\n"


def bench_json() -> dict:
    """The structure einsum_sum_bench.py wrote before the runner: a timed problem, one with a failed
    kernel, one that failed."""
    timed = {
        "problem": dict(t=1024, k=1024, h=16, d=128, dtype="bfloat16", out_dtype="float32"),
        "algorithms": {
            "fused": {"config": {"algorithm": "fused"}, "latency_ms": 0.017, "speedup": 2.0, "rel_fro": 1e-6},
            "direct": {"config": {"algorithm": "direct"}, "error": "RuntimeError: boom"},
        },
        "pytorch": {"rel_fro": 2e-3},
        "no_correct_kernel": ["reduce_first"],
        "timings_ms": {"fused": 0.017, "pytorch": 0.034, "copy": 0.0076, "memset": 0.005},
        "floor_write_s_ms": 0.0038,
    }
    failed = {"problem": dict(t=8192, k=8192, h=16, d=128, dtype="bfloat16", out_dtype="bfloat16"), "error": "Traceback"}
    return {"problems": {"1024": timed, "8192": failed}, "gpu": {"arch": "sm_90a"}}


def replot(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), f"replot={path}"], capture_output=True, text=True, cwd=ROOT)


def test_replot_of_an_old_run_writes_a_png_and_the_verdict(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "einsum_sum_bench.json"
    path.write_text(json.dumps(bench_json()))
    done = replot(path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "einsum_sum_bench.png").read_bytes()[:8] == PNG
    assert "2.00x PyTorch" in done.stdout and "4.47x the write floor" in done.stdout  # 0.017 / (0.0076 / 2)
    assert "runtime_error" in done.stdout  # the failed kernel is listed, not dropped


@pytest.mark.parametrize("content", [None, "not json", json.dumps({"rows": []}), json.dumps([1, 2])])
def test_replot_of_a_missing_or_foreign_file_exits_2(tmp_path, content):
    path = tmp_path / "einsum_sum_bench.json"
    if content is not None:
        path.write_text(content)
    done = replot(path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "einsum_sum_bench.png").exists()


def test_the_committed_run_still_loads():
    from tilesearch.experiment.output import load, table

    assert "pytorch" in table(load(ROOT / "experiments/results/einsum_sum/einsum_sum_bench.json"))
