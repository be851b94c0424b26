import pytest

from tilesearch import cli, dataset, tune
from tilesearch.database import TuningDatabase
from tilesearch.records import Candidate, Status
from tilesearch.runner import ReplayRunner, UnknownRunnerError, create
from tilesearch.target import Target
from tilesearch.testing.synthetic import synthetic_dataset

PROBLEM = {"m": 1024, "n": 1024, "k": 2048}
KNOBS = {"block_m": (64, 128), "block_n": (64, 128), "block_k": (32,), "num_stages": (2, 3), "threads": (128, 256),
         "panel_size": (0,), "warp_policy": ("square",)}


@pytest.fixture
def data(tmp_path):
    return synthetic_dataset(tmp_path / "tiny.jsonl.gz", PROBLEM, KNOBS)


def test_tune_replays_every_row_and_says_so(data, tmp_path):
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    result = tune("gemm", PROBLEM, strategy="grid", runner=ReplayRunner(data.path), storage=storage,
                  trials=100, progress=False)
    assert result.replayed and result.study.startswith("replay:")
    assert result.measured_now == len(data) == data.meta["valid_configs"]
    assert result.best[0].latency_ms == data.best().latency_ms and result.best[0].config == data.best().config
    db = TuningDatabase(storage, result.study)
    assert db.study.user_attrs["replayed"] is True
    assert all(r.replayed and r.attrs["replayed_from"] == "tiny" for r in db.records())


def test_unknown_config_and_problem_are_clear_errors(data):
    runner = ReplayRunner(data)
    target = runner.start()
    config = {**data.rows[0].config, "block_k": 64}
    out = runner.run(Candidate("gemm", data.problem, config, target))
    assert out.status == Status.NOT_RECORDED and "no record" in out.error and out.replayed
    from tilesearch import registry

    op = registry.load("gemm")
    with pytest.raises(dataset.DatasetError, match="holds gemm m=1024"):
        runner.prepare(op.problem(m=512, n=1024, k=2048), op.space(op.problem(m=512, n=1024, k=2048), target))


def test_runner_table():
    with pytest.raises(UnknownRunnerError, match="needs a dataset"):
        create("replay")
    with pytest.raises(UnknownRunnerError, match="unknown runner"):
        create("remote:host")


def test_cli_replay(data, tmp_path, capsys):
    args = ["tune", "op=gemm", "m=1024", "n=1024", "k=2048", f"runner=replay:{data.path}", "strategy=random",
            "trials=5", "progress=false", f"storage=sqlite:///{tmp_path / 'c.db'}"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "[replayed]" in out and "gpu: synthetic (sm_90a)" in out and "measured now: 5" in out
    assert "pipeline: replayed" in out
    assert cli.main([*args[:2], "m=4096", *args[3:]]) == 2
    assert "holds gemm m=1024" in capsys.readouterr().err
    assert cli.main([*args[:5], "runner=replay:/nonexistent.jsonl.gz", *args[6:]]) == 2
    assert "no dataset at" in capsys.readouterr().err


def test_progress_label_says_replayed(data):
    from tilesearch.progress import Progress

    assert Progress(3, "gemm", False, ReplayRunner(data).replayed).label.startswith("[replayed]")
    assert Target.from_dict(data.meta["target"]).gpu == "synthetic"


def test_runner_given_by_name_to_tune_is_used():
    """Regression: tune(runner="replay:PATH") used to be taken as a Runner object and ignored."""
    from tilesearch.tuner import tune as tune_fn

    path = "experiments/data/gemm_4096x4096x4096_float16_nn_h100_80gb_hbm3.jsonl.gz"
    result = tune_fn("gemm", {"m": 4096, "n": 4096, "k": 4096}, runner=f"replay:{path}", strategy="random",
                     trials=3, storage=":memory:", progress=False)
    assert result.replayed and result.measured_now == 3 and result.best[0].replayed
