"""Revalidate on replayed studies: old against new, further search where the winner changed, and
a non-zero exit on a planted regression (a second dataset where kernels got slower)."""

from dataclasses import replace

import pytest

from tilesearch import cli, dataset
from tilesearch.revalidate import RevalidateError, revalidate
from tilesearch.testing.synthetic import synthetic_dataset
from tilesearch.tuner import tune

PROBLEM = {"m": 1024, "n": 1024, "k": 2048}
KNOBS = {"block_m": (64, 128), "block_n": (64, 128), "block_k": (32,), "num_stages": (2, 3), "threads": (128, 256),
         "panel_size": (0,), "warp_policy": ("square",)}
ARGS = ["op=gemm", "m=1024", "n=1024", "k=2048"]


@pytest.fixture
def old(tmp_path):
    """A replayed study of every configuration of a small dataset, and the dataset."""
    data = synthetic_dataset(tmp_path / "old.jsonl.gz", PROBLEM, KNOBS)
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    result = tune("gemm", PROBLEM, runner=f"replay:{data.path}", strategy="grid", trials=100, storage=storage,
                  progress=False)
    return data, storage, result


def slower(data, path, factor, only_best=False):
    """``data`` with kernels ``factor`` times slower (all, or only its best)."""
    best = data.best().config
    rows = [replace(r, latency_ms=r.latency_ms * factor, tflops=r.tflops / factor)
            if r.ok and (not only_best or r.config == best) else r for r in data.rows]
    return dataset.write(path, data.meta, rows)


def test_same_figures_are_not_a_regression_and_search_nothing(old, tmp_path):
    data, storage, result = old
    same = slower(data, tmp_path / "same.jsonl.gz", 1.0)
    out = revalidate("gemm", PROBLEM, storage=storage, runner=f"replay:{same.path}", top=3, predicted=2)
    assert out.old_study == result.study and out.study != out.old_study
    assert out.differences == ["source of the figures: dataset:old -> dataset:same"]
    assert [r.source for r in out.rows] == ["old top"] * 3 + ["predicted"] * 2
    assert not out.winner_changed and not out.regressed and out.searched == 0
    assert out.old_winner_lost == 0 and out.basis == "latency"
    for row in out.rows[:3]:
        assert row.new.latency_ms == row.old_latency_ms  # old against new, replayed from the same figures


def test_planted_regression_exits_1(old, tmp_path, capsys):
    data, storage, _ = old
    worse = slower(data, tmp_path / "worse.jsonl.gz", 1.25)
    code = cli.main(["revalidate", *ARGS, f"storage={storage}", f"runner=replay:{worse.path}", "top=3", "search=4"])
    text = capsys.readouterr().out
    assert code == 1, text
    assert "verdict: REGRESSED" in text and "old winner: latency_ms" in text and "(-25.0%" in text
    assert "differs: source of the figures: dataset:old -> dataset:worse" in text


def test_winner_that_lost_is_searched_further_and_replaced(old, tmp_path):
    data, storage, _ = old
    lost = slower(data, tmp_path / "lost.jsonl.gz", 1.3, only_best=True)
    out = revalidate("gemm", PROBLEM, storage=storage, runner=f"replay:{lost.path}", top=3, predicted=0, search=4)
    assert out.winner_changed and out.old_winner_lost == pytest.approx(0.3)
    assert out.searched == 4
    second = sorted(r.latency_ms for r in data.ok_rows())[1]
    assert out.best_now <= second * 1.0000001  # the old runner-up (re-measured) is the best now
    assert out.regressed == (second / data.best().latency_ms - 1 > 0.02)


def test_nothing_to_revalidate_is_a_clear_error(tmp_path, capsys):
    data = synthetic_dataset(tmp_path / "d.jsonl.gz", PROBLEM, KNOBS)
    with pytest.raises(RevalidateError, match="no study of gemm"):
        revalidate("gemm", PROBLEM, storage=f"sqlite:///{tmp_path / 'e.db'}", runner=f"replay:{data.path}")
    assert cli.main(["revalidate", *ARGS, f"storage=sqlite:///{tmp_path / 'e.db'}", f"runner=replay:{data.path}"]) == 2
    assert "run tilesearch tune first" in capsys.readouterr().err
