
import pytest

from search_spaces.gemm import GemmOp
from tilesearch import cli, dataset, registry, tune
from tilesearch.experiment.record import SUBSPACE
from tilesearch.runner import ReplayRunner
from tilesearch.strategy import hints
from tilesearch.target import Target
from tilesearch.testing.synthetic import synthetic_dataset
from tilesearch.testing.toy import ToyOp

KNOBS = {"block_m": (64, 128), "block_n": (64, 128), "block_k": (32, 64), "num_stages": (2, 3), "threads": (128, 256),
         "panel_size": (0,), "warp_policy": ("square",)}


def test_carver_hints_are_valid_distinct_configs_of_the_space():
    op = registry.load("gemm")
    problem = op.problem(m=8192, n=8192, k=8192)
    space = dataset.narrow(op.space(problem, Target.from_arch("sm_90a")), SUBSPACE)
    configs = op.hints(problem, space, Target.from_arch("sm_90a"), kind="carver", n=6)
    assert len(configs) == 6 and all(space.is_valid(c) for c in configs)
    assert len({tuple(sorted(c.items())) for c in configs}) == 6
    toy = ToyOp()
    with pytest.raises(hints.HintError, match="unknown hints 'carver' for op 'toy'; it offers: none"):
        toy.hints(toy.problem(size=4), space, Target.from_arch("sm_90a"), kind="carver", n=6)


@pytest.mark.parametrize("strategy", ["random", "tpe", "xgb"])
def test_hinted_configurations_are_measured_first(tmp_path, monkeypatch, strategy):
    data = synthetic_dataset(tmp_path / "d.jsonl.gz", {"m": 1024, "n": 1024, "k": 1024}, KNOBS)
    picks = [data.rows[5].config, data.rows[2].config]
    op = GemmOp()  # an instance, not looked up in the registry: its own hints are used
    monkeypatch.setattr(op, "hints", lambda problem, space, target, *, kind, n: picks if kind == "fixed" else [])
    runner = ReplayRunner(data)
    seen = []
    original = runner.run
    monkeypatch.setattr(runner, "run", lambda c, incumbent=None: seen.append(c.config) or original(c, incumbent))
    tune(op, data.problem, strategy=strategy, runner=runner, storage=":memory:", trials=6, hints="fixed",
         progress=False)
    assert seen[:2] == picks and len(seen) == 6 and picks[0] not in seen[2:]


def test_unknown_hints_are_a_usage_error(tmp_path, capsys):
    data = synthetic_dataset(tmp_path / "d.jsonl.gz", {"m": 1024, "n": 1024, "k": 1024}, KNOBS)
    assert cli.main(["tune", "op=gemm", "m=1024", "n=1024", "k=1024", f"runner=replay:{data.path}", "hints=magic",
                     "progress=false"]) == 2
    assert "unknown hints 'magic'" in capsys.readouterr().err
