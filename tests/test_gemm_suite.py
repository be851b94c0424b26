"""experiments/gemm_suite.py end to end without a GPU: a made-up runner stands in for it, so this
checks the plumbing (search, flips, ablation, table), not any figure."""

import json
import sys
from pathlib import Path

from tilesearch.builder import NullBuilder
from tilesearch.records import RunResult, Status
from tilesearch.runner import Runner
from tilesearch.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import gemm_suite  # noqa: E402


def made_up_ms(c):
    """Faster with split-K and an smem epilogue, slower persistent; torch takes 1 ms."""
    ms = 1.0 + c["block_k"] / 640 + c["num_stages"] / 100
    ms *= 0.8 if c.get("split_k", 1) > 1 else 1.0
    ms *= 0.9 if c.get("epilogue", "direct") == "smem" else 1.0
    ms *= 1.1 if c.get("persistent", False) else 1.0
    return ms


class MadeUpRunner(Runner):
    def __init__(self, **_):
        self.target = Target.from_arch("sm_90a", gpu="made-up")

    def start(self):
        return self.target

    def run(self, candidate):
        ms = made_up_ms(candidate.config)
        return RunResult(Status.OK, latency_ms=ms, tflops=1.0 / ms, baseline_ms=1.0, speedup=1.0 / ms)


def test_suite_searches_flips_and_tabulates(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gemm_suite, "LocalRunner", MadeUpRunner)
    monkeypatch.setattr(gemm_suite, "LocalBuilder", lambda *a, **kw: NullBuilder())
    assert gemm_suite.main(["--out", str(tmp_path), "--shapes", "longk,odd4097", "--trials", "12",
                            "--budget-s", "300"]) == 0
    rows = json.loads((tmp_path / "gemm_suite.json").read_text())["shapes"]
    assert [r["shape"] for r in rows] == ["longk", "odd4097"]
    for row in rows:
        best = row["best_config"]
        assert row["ratio"] == 1.0 / made_up_ms(best)
        for entry in row["ablation"].values():
            if entry["flip"] == "measure":
                assert entry["flip_status"] == "ok"
                assert entry["flip_gain"] > 0
            else:
                assert entry["flip_gain"] == 1.0
        if best.get("split_k", 1) > 1:
            assert abs(row["ablation"]["split_k"]["flip_gain"] - 1.25) < 1e-9
    assert rows[1]["ablation"]["split_k"]["flip"] == "same"  # K = 129: no split-K offered
    out = capsys.readouterr().out
    assert "geometric mean tuned/torch over 2 shapes" in out.splitlines()[-1]
