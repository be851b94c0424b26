"""experiments/gemm_studies.py's plots from made-up tables (the studies themselves need a GPU)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import gemm_studies  # noqa: E402


def test_plots_write_pngs_with_and_without_tuned_points(tmp_path):
    pytest.importorskip("matplotlib")
    swizzle = [{"size": s, "panel_0": 300.0, "panel_10": 370.0, "panel_20": 365.0, "torch": 740.0} for s in (12288, 13312)]
    swizzle[0].update(tuned=700.0, tuned_vs_torch=1.01)
    pipelining = [{"shape": "4096x4096x4096", "stages_1": 230.0, "stages_2": 390.0, "torch": 750.0, "tuned": 640.0}]
    for name, table in (("swizzle", swizzle), ("pipelining", pipelining), ("swizzle", swizzle[1:])):
        gemm_studies.plot(name, table, tmp_path)
        png = tmp_path / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        png.unlink()
