"""experiments/gemm_suite.py end to end without a GPU: a made-up runner stands in for it, so this
checks the plumbing (search, re-time with the ablations, table, verdict), not any figure."""

import math
import runpy
from dataclasses import replace
from pathlib import Path

from tilesearch.experiment import run
from tilesearch.records import RunResult, Status
from tilesearch.runner import Runner
from tilesearch.target import Target

SUITE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "gemm_suite.py"))


def made_up_ms(c):
    """Faster with split-K and an smem epilogue, slower persistent; torch takes 1 ms."""
    ms = 1.0 + c["block_k"] / 640 + c["num_stages"] / 100
    ms *= 0.8 if c.get("split_k", 1) > 1 else 1.0
    ms *= 0.9 if c.get("epilogue", "direct") == "smem" else 1.0
    ms *= 1.1 if c.get("persistent", False) else 1.0
    return ms


class MadeUpRunner(Runner):
    replayed = True  # made-up figures: no compilation, and every output says so

    def start(self):
        return Target.from_arch("sm_90a", gpu="made-up")

    def run(self, candidate, incumbent=None):
        ms = made_up_ms(candidate.config)
        return RunResult(Status.OK, latency_ms=ms, tflops=1.0 / ms, baseline_ms=1.0, speedup=1.0 / ms, replayed=True)


def test_suite_searches_retimes_with_ablations_and_gives_its_verdict(tmp_path, capsys):
    shapes = SUITE["SHAPES"]
    suite = replace(SUITE["SUITE"], problems=(shapes["sq4096"], shapes["odd1000"]), strategies=("random",),
                    trials=12, runner=lambda problem: MadeUpRunner(), out=str(tmp_path))
    result = run(suite)
    assert any(n["status"] == "measured" for p in result["problems"] for n in p["retime"]["ablations"].values())
    for prob in result["problems"]:
        retime = prob["retime"]
        best = next(e for e in retime["entries"] if e["kind"] == "tilesearch")
        notes = retime["ablations"]
        assert set(notes) == {"split_k", "persistent", "epilogue", "tma_ws", "all_new"}
        for name, note in notes.items():
            if note["status"] == "measured":
                reset = next(e for e in retime["entries"] if e["label"] == f"without {name}")
                assert math.isclose(note["gain"], made_up_ms(reset["config"]) / made_up_ms(best["config"]))
            elif note["status"] == "same":
                assert note["gain"] == 1.0 and all(best["config"].get(k) == v for k, v in
                                                   SUITE["GROUPS"][name].items() if k in best["config"])
            else:
                assert note["status"] == "invalid" and note["reason"]
    verdict = SUITE["verdict"](result)
    assert verdict.startswith("geometric mean tuned/torch over 2 shapes")
    assert "ablation split_k" in (tmp_path / "gemm_suite.txt").read_text()


def test_verdict_without_ratios_says_so():
    assert "no shape" in SUITE["verdict"]({"problems": [{"retime": None}]})
