"""experiments/gemm_studies.py: the experiments it declares, and the size plot of a made-up run
(the studies themselves need a GPU)."""

import runpy
from pathlib import Path

import pytest

from tilesearch.experiment import ExperimentError
from tilesearch.experiment.output import plot

STUDIES = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "gemm_studies.py"))


def test_plan_declares_the_fixed_sweeps_and_the_tuned_searches():
    experiments, rest = STUDIES["plan"](["studies=swizzle", "trials=12", "tuned_sizes=12288,16384", "out=o"])
    fixed, tuned = experiments
    assert [p["m"] for p in fixed.problems] == list(range(12288, 20481, 1024)) and fixed.knobs["panel_size"] == (0, 10, 20)
    assert [p["m"] for p in tuned.problems] == [12288, 16384] and tuned.trials == 12 and tuned.knobs is None
    assert rest == ["out=o"]
    with pytest.raises(ExperimentError, match="unknown study"):
        STUDIES["plan"](["studies=tiling"])


def test_size_plot_draws_a_line_per_swept_configuration(tmp_path):
    pytest.importorskip("matplotlib")

    def entry(panel, ms):
        return {"label": f"grid/0#{panel}", "kind": "tilesearch", "config": {"panel_size": panel, "block_m": 128},
                "result": {"status": "ok", "latency_ms": ms}}

    problems = [{"problem": {"m": m}, "key": str(m), "flops": 2.0 * m**3, "searches": [],
                 "retime": {"entries": [entry(0, 3.0), entry(10, 2.5),
                                        {"label": "torch", "kind": "peer", "config": None,
                                         "result": {"status": "ok", "latency_ms": 2.0}}], "ties": []}}
                for m in (12288, 13312)]
    result = {"experiment": {"name": "s", "x": "m", "knobs": {"panel_size": [0, 10], "block_m": [128]}},
              "problems": problems}
    assert plot(result, tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
