import numpy as np
import pytest

from tilesearch import registry, tune
from tilesearch.cost_model import Featurizer, XGBRanker, gemm_features, relevance
from tilesearch.database import TuningDatabase
from tilesearch.runner import ReplayRunner
from tilesearch.strategy import SearchContext, UnknownStrategyError, XGBStrategy, create
from tilesearch.target import Target
from tilesearch.testing.synthetic import synthetic_dataset

KNOBS = {"block_m": (64, 128), "block_n": (64, 128, 256), "block_k": (32, 64), "num_stages": (2, 3), "threads": (128, 256),
         "panel_size": (0, 8), "warp_policy": ("square",)}
H100 = Target.from_arch("sm_90a")


@pytest.fixture
def sets(tmp_path):
    a = synthetic_dataset(tmp_path / "a.jsonl.gz", {"m": 4096, "n": 4096, "k": 4096}, KNOBS)
    b = synthetic_dataset(tmp_path / "b.jsonl.gz", {"m": 2048, "n": 4096, "k": 8192, "dtype": "bfloat16"}, KNOBS)
    return a, b


def test_gemm_features_of_a_known_config():
    f = gemm_features({"m": 8192, "n": 8192, "k": 8192, "dtype": "float16"},
                      {"block_m": 128, "block_n": 256, "block_k": 64, "num_stages": 3, "threads": 256,
                       "panel_size": 8, "warp_policy": "square"}, H100)
    assert f["log2_tiles"] == 11  # 64 x 32 tiles
    assert f["smem_kb"] == 144 and f["blocks_per_sm"] == 1
    assert f["waves"] == pytest.approx(2048 / 132) and f["last_wave_occupancy"] == pytest.approx((2048 - 15 * 132) / 132)
    assert f["k_iters_per_stage"] == pytest.approx(128 / 3) and f["tile_intensity"] == pytest.approx(128 * 256 / 384)
    assert (f["warp_tile_m"], f["warp_tile_n"]) == (64, 64)


def test_columns_do_not_depend_on_the_sub_space_or_problem(sets):
    a, b = sets
    op = registry.load("gemm")
    full = op.space(op.problem(**a.problem), H100)
    f = Featurizer("gemm", full)
    xa = f.matrix(a.problem, [r.config for r in a.rows], H100)
    xb = f.matrix(b.problem, [r.config for r in b.rows], H100)
    assert xa.shape[1] == xb.shape[1] == len(f.names) and not np.isnan(xa).any()
    assert "warp_policy=full_col" in f.names  # one-hot over the full space, not the sub-space


def test_model_save_load_round_trip(sets):
    a, _ = sets
    op = registry.load("gemm")
    f = Featurizer("gemm", op.space(op.problem(**a.problem), H100))
    x = f.matrix(a.problem, [r.config for r in a.rows], H100)
    model = XGBRanker()
    assert model.fit([(x, relevance([r.tflops for r in a.rows]))])
    again = XGBRanker.load(model.save())
    assert np.array_equal(model.predict(x), again.predict(x))
    assert not XGBRanker().fit([(x[:1], np.ones(1))])  # nothing to order


def test_relevance_puts_failures_last():
    assert list(relevance([2.0, None, 1.0])) == [1.0, 0.0, 0.125]


def test_transfer_trains_before_any_trial_and_model_is_kept_with_the_study(sets, tmp_path):
    a, b = sets
    storage = f"sqlite:///{tmp_path / 's.db'}"
    strategy = XGBStrategy(0, transfer=[a.path], auto_transfer=False)
    result = tune("gemm", b.problem, strategy=strategy, runner=ReplayRunner(b), storage=storage, trials=6,
                  progress=False)
    assert [g.source for g in strategy.sources] == ["dataset:a.jsonl.gz"]
    db = TuningDatabase(storage, result.study)
    saved = db.study.user_attrs["xgb_model"]
    # the last round of proposals (pipeline depth 2) was scored after 4 results
    assert saved["trained_on"] == 4 and saved["sources"] == ["dataset:a.jsonl.gz"]
    op = registry.load("gemm")
    problem = op.problem(**b.problem)
    space = b.restrict(op.space(problem, H100))
    resumed = XGBStrategy(0, auto_transfer=False)
    resumed._setup(SearchContext(op, problem, space, H100, db))
    assert resumed.model is not None and resumed._trained_on == 4
    x = resumed._features(SearchContext(op, problem, space, H100, db), [r.config for r in b.rows])
    assert np.array_equal(resumed.model.predict(x), XGBRanker.load(saved["model"]).predict(x))


def test_auto_transfer_from_other_studies_in_storage(sets, tmp_path):
    a, b = sets
    storage = f"sqlite:///{tmp_path / 's.db'}"
    tune("gemm", a.problem, strategy="random", runner=ReplayRunner(a), storage=storage, trials=10, progress=False)
    strategy = XGBStrategy(1)
    tune("gemm", b.problem, strategy=strategy, runner=ReplayRunner(b), storage=storage, trials=3, progress=False)
    assert len(strategy.sources) == 1 and strategy.sources[0].source.startswith("study:replay:gemm[m=4096")
    assert len(strategy.sources[0].y) == 10


def test_transfer_option_is_for_xgb_only():
    assert isinstance(create("xgb", 0, transfer="x.jsonl.gz"), XGBStrategy)
    with pytest.raises(UnknownStrategyError, match="takes no option transfer"):
        create("random", 0, transfer="x.jsonl.gz")
