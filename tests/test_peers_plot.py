"""experiments/peers_gemm.py replot=: the table and plot of a recorded run, without a GPU; the
runs recorded before the shared experiment runner still load."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "peers_gemm.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_replot_draws_a_run_recorded_before_the_shared_runner_and_refuses_other_files(tmp_path):
    pytest.importorskip("matplotlib")
    flops = 2 * 64**3
    rows = [
        {"tool": "tilelang autotune", "configs": 4, "wall_s": 10.0, "best_ms": 1.0, "tflops": flops / 1e9},
        {"tool": "tilesearch grid", "configs": 4, "wall_s": 2.0, "best_ms": 1.0, "tflops": flops / 1e9,
         "build_wall_s": 1.5, "build_workers": 4},
    ]
    retime = {"tilelang autotune": {"ms": 1.0}, "tilesearch grid": {"ms": 0.9}, "torch.matmul": {"ms": 0.95}}
    recorded = tmp_path / "peers_gemm.json"
    recorded.write_text(json.dumps({"tools": rows, "retime": retime}))
    done = run(f"replot={recorded}")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "peers_gemm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("tilesearch grid") and "ok" in x)
    assert "1.056" in line  # 0.95 / 0.9: its ratio to torch.matmul in the recorded re-time
    missing = run("--replot", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert run("grid=huge").returncode == 2


@pytest.mark.parametrize("path", ["peers/run3/peers_gemm.json", "peers/run4/peers_gemm.json"])
def test_committed_runs_still_load(path):
    from tilesearch.experiment.output import load, table

    result = load(ROOT / "experiments/results" / path)
    assert "torch.matmul" in table(result)
