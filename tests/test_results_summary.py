"""experiments/results/summary.json: the headline figures of RESULTS.md, machine-readable."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"name", "value", "interval", "unit", "target", "gpu", "date", "commit", "command", "source", "note"}


def test_every_figure_has_its_fields_and_its_source_exists():
    data = json.loads((ROOT / "experiments/results/summary.json").read_text())
    assert data["format"] == "tilesearch-results-summary" and data["version"] == 1
    names = [f["name"] for f in data["figures"]]
    assert len(names) == len(set(names)) and len(names) >= 10
    for fig in data["figures"]:
        assert set(fig) == FIELDS, fig["name"]
        assert isinstance(fig["value"], (int, float, list)) and fig["unit"] and fig["gpu"] and fig["command"]
        assert len(fig["commit"]) >= 7 and fig["date"].startswith("20")
        assert (ROOT / fig["source"]).is_file(), f"{fig['name']}: {fig['source']} does not exist"
        if fig["interval"] is None:
            assert fig["note"], f"{fig['name']}: an interval left out must say why"
        else:
            low, high = fig["interval"]
            assert low <= fig["value"] <= high, fig["name"]
        assert fig["commit"] in (ROOT / "RESULTS.md").read_text() or fig["source"].startswith("experiments/data/")
