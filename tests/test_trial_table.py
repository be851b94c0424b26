"""The CSV/DataFrame export of a study's trials: one row per configuration."""

import csv
import io

import pytest

from tilesearch import cli, trial_table
from tilesearch.database import TuningDatabase
from tilesearch.strategy import create
from tilesearch.testing.synthetic import synthetic_dataset
from tilesearch.tuner import tune

PROBLEM = {"m": 1024, "n": 1024, "k": 2048}
KNOBS = {"block_m": (64, 128), "block_n": (64, 128), "block_k": (32,), "num_stages": (2, 3), "threads": (128,),
         "panel_size": (0,), "warp_policy": ("square",)}


def test_csv_has_one_row_per_configuration_even_when_the_strategy_repeats_itself(tmp_path, capsys):
    data = synthetic_dataset(tmp_path / "d.jsonl.gz", PROBLEM, KNOBS)
    storage = f"sqlite:///{tmp_path / 't.db'}"
    # TPE's random start draws distinct configurations, and launched at once they cover all 8: with
    # its start proposed a round at a time instead, its own draws after the first round repeat some
    repeating = create("tpe", 0)
    repeating.blind = 0
    result = tune("gemm", PROBLEM, runner=f"replay:{data.path}", strategy=repeating, trials=len(data), storage=storage,
                  progress=False, retime=0)
    db = TuningDatabase(storage, result.study)
    records = db.records()
    copies = [r for r in records if r.duplicate_of is not None]
    assert copies, "TPE on 8 configurations re-proposes some: the test needs copies to leave out"
    keys = {r.key for r in records}
    table = trial_table.trials("gemm", PROBLEM, storage=storage)
    assert len(table) == len(keys) == len(records) - len(copies)
    assert sorted(r["trial"] for r in table) == sorted(db.finished()[k].number for k in keys)

    out = tmp_path / "trials.csv"
    assert cli.main(["trials", "op=gemm", "m=1024", "n=1024", "k=2048", f"storage={storage}", f"out={out}"]) == 0
    assert f"wrote {len(keys)} trials" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == len(keys) and {"trial", "status", "config.block_m", "latency_ms", "speedup_low"} <= set(rows[0])
    best = min((r for r in rows if r["status"] == "ok"), key=lambda r: float(r["latency_ms"]))
    assert float(best["latency_ms"]) == data.best().latency_ms
    assert cli.main(["trials", "op=gemm", "m=1024", "n=1024", "k=2048", f"storage={storage}"]) == 0
    assert list(csv.DictReader(io.StringIO(capsys.readouterr().out))) == rows  # same on stdout


def test_no_study_exits_2_and_dataframe_needs_pandas(tmp_path, capsys):
    assert cli.main(["trials", "op=gemm", "m=8", "n=8", "k=8", f"storage=sqlite:///{tmp_path / 'e.db'}"]) == 2
    assert "run tilesearch tune first" in capsys.readouterr().err
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            trial_table.to_dataframe([{"trial": 0}])
    else:
        assert len(trial_table.to_dataframe([{"trial": 0}, {"trial": 1}])) == 2
