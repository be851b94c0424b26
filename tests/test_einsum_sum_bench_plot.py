"""experiments/einsum_sum_bench.py --replot: the plot from a made-up JSON (the bench itself needs a GPU)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import einsum_sum_bench  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def bench_json() -> dict:
    """The structure einsum_sum_bench.py writes: a timed problem, one with a failed kernel, one that failed."""
    timed = {
        "problem": dict(t=1024, k=1024, h=16, d=128, dtype="bfloat16", out_dtype="float32"),
        "algorithms": {
            "fused": {"config": {"algorithm": "fused"}, "latency_ms": 0.017, "speedup": 2.0},
            "direct": {"config": {"algorithm": "direct"}, "error": "RuntimeError: boom"},
        },
        "no_correct_kernel": ["reduce_first"],
        "timings_ms": {"fused": 0.017, "pytorch": 0.034, "copy": 0.0076, "memset": 0.005},
        "floor_write_s_ms": 0.0038,
    }
    no_floor = {**timed, "floor_write_s_ms": None, "no_correct_kernel": []}
    failed = {"problem": dict(t=8192, k=8192, h=16, d=128, dtype="bfloat16", out_dtype="bfloat16"), "error": "Traceback"}
    return {"problems": {"1024": timed, "no-floor": no_floor, "8192": failed}, "gpu": {"arch": "sm_90a"}}


def replot(monkeypatch, path: Path) -> int:
    monkeypatch.setattr(sys, "argv", ["einsum_sum_bench.py", "--replot", str(path)])
    return einsum_sum_bench.main()


def test_replot_writes_a_png_next_to_the_json(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    path = tmp_path / "einsum_sum_bench.json"
    path.write_text(json.dumps(bench_json()))
    assert replot(monkeypatch, path) == 0
    assert (tmp_path / "einsum_sum.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize("content", [None, "not json", json.dumps({"rows": []}), json.dumps([1, 2])])
def test_replot_of_a_missing_or_foreign_file_exits_2(tmp_path, monkeypatch, capsys, content):
    path = tmp_path / "einsum_sum_bench.json"
    if content is not None:
        path.write_text(content)
    assert replot(monkeypatch, path) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "einsum_sum.png").exists()
