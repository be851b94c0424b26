"""experiments/peers_gemm.py --replot: the plot of a recorded run, without a GPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "peers_gemm.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_replot_draws_a_recorded_run_and_refuses_a_wrong_shape(tmp_path):
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
    done = run("--replot", str(recorded), "--m", "64", "--n", "64", "--k", "64")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "peers_gemm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    wrong = run("--replot", str(recorded))  # the default shape is 8192^3
    assert wrong.returncode == 2 and "pass that run's --m --n --k" in wrong.stderr
    missing = run("--replot", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
