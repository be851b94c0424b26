import numpy as np
import pytest

from search_spaces.gemm_model import estimate as gemm_estimate
from search_spaces.gemm_model import features as gemm_features
from search_spaces.gemm_model import warp_grid
from tilesearch import registry, tune
from tilesearch.cost_model import Featurizer, TrainingGroup, XGBRanker, relevance
from tilesearch.database import TuningDatabase, hold_out
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
    # Hopper warp-group MMA: square keeps one group of four warps along M, the other group along N
    assert (f["warp_tile_m"], f["warp_tile_n"]) == (32, 128) and (f["mma_tile_m"], f["mma_tile_n"]) == (128, 128)
    assert f["sm_efficiency"] == pytest.approx(2048 / (16 * 132)) and f["warps_per_sm"] == 12  # a producer group too


def test_warp_partition_follows_tilelang_for_warp_group_mma():
    for policy in ("square", "full_row", "full_col"):  # one warp group: the same kernel whatever the policy
        assert warp_grid(policy, 4, 128, 128, wgmma=True) == (4, 1)
    assert warp_grid("full_row", 8, 256, 128, wgmma=True) == (8, 1)  # two groups along M
    assert warp_grid("full_row", 8, 64, 128, wgmma=True) == (4, 2)  # 64 rows hold one group only
    assert warp_grid("square", 8, 256, 128, wgmma=True) == warp_grid("full_col", 8, 256, 128, wgmma=True) == (4, 2)


def test_estimate_sees_idle_sms_and_tile_intensity():
    small = {"m": 1024, "n": 1024, "k": 14336}
    tile = {"block_k": 64}
    # 128 tiles of 64 x 128 nearly fill 132 SMs; 64 tiles of 128 x 128 leave half of them idle
    assert gemm_estimate(small, {**tile, "block_m": 64, "block_n": 128}, H100) > \
        gemm_estimate(small, {**tile, "block_m": 128, "block_n": 128}, H100)
    big = {"m": 8192, "n": 8192, "k": 8192}
    assert gemm_estimate(big, {**tile, "block_m": 256, "block_n": 128}, H100) > \
        gemm_estimate(big, {**tile, "block_m": 128, "block_n": 128}, H100) > \
        gemm_estimate(big, {**tile, "block_m": 64, "block_n": 64}, H100)
    assert 0 < gemm_estimate(big, {**tile, "block_m": 256, "block_n": 128}, H100) <= 1


def test_estimate_sees_the_bytes_of_a_decode_gemm_and_its_split_k_partial_sums():
    # measured on the H100 (trust round at cc19ce4): 64x128 tiles with split-K 4 at 0.955x
    # torch.matmul, 64x256 with split-K 8 at 0.90x; both launch 128 blocks, and the larger tile
    # has the higher compute intensity, but it writes and reads twice the float32 partial sums
    decode = {"m": 16, "n": 4096, "k": 4096}
    tile = {"block_m": 64, "block_k": 128}
    assert gemm_estimate(decode, {**tile, "block_n": 128, "split_k": 4}, H100) > \
        gemm_estimate(decode, {**tile, "block_n": 256, "split_k": 8}, H100)
    # 32 blocks on 132 SMs draw a quarter of the bandwidth: split-K 4 beats no split
    assert gemm_estimate(decode, {**tile, "block_n": 128, "split_k": 4}, H100) > \
        gemm_estimate(decode, {**tile, "block_n": 128, "split_k": 1}, H100)


def test_estimate_sees_the_bytes_in_flight_of_a_decode_gemm():
    # measured on the H100 (scripts/gemm_probe.py, 2026-11-24), 16 x 4096 x 4096 bfloat16 nt: swapped
    # 16 x 64 x 128 tiles with 5 stages 21.7 us, with 3 stages 25.5 us; 64 x 128 x 128 with split-K 4
    # 25.5 us; swapped 16 x 256 x 64 tiles with 3 stages (16 blocks, 1.7 MB in flight) 37.7 us
    decode = {"m": 16, "n": 4096, "k": 4096}
    swapped = {"block_m": 16, "block_n": 64, "block_k": 128, "swap_ab": True}
    deep = gemm_estimate(decode, {**swapped, "num_stages": 5}, H100)
    assert deep > gemm_estimate(decode, {**swapped, "num_stages": 3}, H100)
    assert deep > gemm_estimate(decode, {"block_m": 64, "block_n": 128, "block_k": 128, "num_stages": 3, "split_k": 4},
                                H100)
    assert gemm_estimate(decode, {**swapped, "block_n": 256, "block_k": 64, "num_stages": 3}, H100) < deep / 1.5


# measured on four H200s (2026-11-28, 14cc9b0; experiments/results/deploy/ranges_2026-11-28_h200x4_14cc9b0,
# 14336x4096.db.xz), 14336 x 4096 bfloat16 nt: a 64x112 tile launched row-major took 0.0417 ms at 64 rows
# and 0.0692-0.0699 ms from 65 to 128; the same tile in panels of 8 tile rows 0.0472 ms at 72
ROW_MAJOR = {"block_m": 64, "block_n": 112, "block_k": 128, "num_stages": 5, "panel_size": 0, "raster": "row"}
PANELLED = {"block_m": 64, "block_n": 224, "block_k": 128, "num_stages": 3, "panel_size": 8, "raster": "row"}


def test_estimate_sees_b_read_again_for_each_tile_row_of_a_row_major_launch():
    at = {m: {"m": m, "n": 14336, "k": 4096} for m in (64, 65, 128)}
    time = {m: {key: 2 * m * 14336 * 4096 / gemm_estimate(problem, c, H100)
                for key, c in (("row_major", ROW_MAJOR), ("panelled", PANELLED))} for m, problem in at.items()}
    assert time[65]["row_major"] > 1.8 * time[64]["row_major"]  # a second tile row reads B's 117 MB again
    assert time[128]["row_major"] < 1.05 * time[65]["row_major"]  # and no more up to the second row's end
    assert time[65]["panelled"] < 1.05 * time[64]["panelled"]  # a panel of 8 tile rows reads B once
    # an operand that fits in L2 comes back from it, however often the launch order returns
    small = {"m": 65, "n": 1024, "k": 1024}
    assert gemm_estimate(small, ROW_MAJOR, H100) == gemm_estimate(small, {**ROW_MAJOR, "panel_size": 8}, H100)


def test_a_range_edge_stops_where_a_row_major_tile_reads_b_a_second_time():
    # the figures of that range: the row-major tile measured at 64 and 72 rows, the panelled one at
    # 72; before B's re-reads were modelled the edge fell at 69, and 65 rows lost 61.7%
    from tilesearch.buckets import Table, config_key, crossing
    from tilesearch.range_tuner import _modelled
    from tilesearch.ranges import SizeRange

    left, right = config_key(ROW_MAJOR), config_key(PANELLED)
    table = Table(latency={64: {left: 0.04166}, 72: {left: 0.06938, right: 0.04304}},
                  configs={left: ROW_MAJOR, right: PANELLED})
    shape = _modelled(registry.load("gemm"), SizeRange("m", 1, 16384),  # the range's own model
                      {"n": 14336, "k": 4096, "dtype": "bfloat16", "layout": "nt"}, table, H100)
    assert crossing(table, 64, 72, left, right, shape) == 64


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


def test_prior_margin_and_group_weights():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = relevance(list(np.exp(x[:, 0])))
    margin = 5.0 * x[:, 1]  # a prior that knows only the second column
    model = XGBRanker()
    assert model.fit([TrainingGroup(x, y, margin, weight=2.0), TrainingGroup(x[:10], y[:10])])
    assert not np.array_equal(model.predict(x, margin), model.predict(x))  # the prior is part of the score


def test_initial_design_takes_the_estimate_top_and_varies_the_knobs(sets, tmp_path):
    _, b = sets
    storage = f"sqlite:///{tmp_path / 's.db'}"
    result = tune("gemm", b.problem, strategy=XGBStrategy(0, auto_transfer=False, init=4), runner=ReplayRunner(b),
                  storage=storage, trials=4, progress=False)
    configs = [r.config for r in TuningDatabase(storage, result.study).records()]
    assert len(configs) == 4
    estimates = [gemm_estimate(b.problem, c, H100) for c in configs]
    best = max(gemm_estimate(b.problem, r.config, H100) for r in b.rows)
    assert min(estimates) >= 0.85 * best
    # here the estimate ties 128 x 256 tiles on 256 threads (8 configurations): the second pick
    # differs from the first in all three knobs left (block_k, num_stages, panel_size)
    assert sum(configs[0][k] != configs[1][k] for k in configs[0]) == 3
    assert len({str(sorted(c.items())) for c in configs}) == 4


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
    x, margin = resumed._features(SearchContext(op, problem, space, H100, db), [r.config for r in b.rows])
    assert np.array_equal(resumed.model.predict(x, margin), XGBRanker.load(saved["model"]).predict(x, margin))


def test_auto_transfer_from_other_studies_in_storage(sets, tmp_path):
    a, b = sets
    storage = f"sqlite:///{tmp_path / 's.db'}"
    tune("gemm", a.problem, strategy="random", runner=ReplayRunner(a), storage=storage, trials=10, progress=False)
    strategy = XGBStrategy(1)
    tune("gemm", b.problem, strategy=strategy, runner=ReplayRunner(b), storage=storage, trials=3, progress=False)
    assert len(strategy.sources) == 1 and strategy.sources[0].source.startswith("study:replay:gemm[m=4096")
    assert len(strategy.sources[0].y) == 10


def test_auto_transfer_skips_studies_held_out_to_certify_a_range(sets, tmp_path):
    a, b = sets
    storage = f"sqlite:///{tmp_path / 's.db'}"
    tune("gemm", a.problem, strategy="random", runner=ReplayRunner(a), storage=storage, trials=10, progress=False)
    hold_out(storage, "gemm", [registry.load("gemm").problem(**a.problem).key], "m=1..4096,n=4096,k=4096")
    strategy = XGBStrategy(1)
    tune("gemm", b.problem, strategy=strategy, runner=ReplayRunner(b), storage=storage, trials=3, progress=False)
    assert strategy.sources == []


def test_transfer_option_is_for_xgb_only():
    assert isinstance(create("xgb", 0, transfer="x.jsonl.gz"), XGBStrategy)
    with pytest.raises(UnknownStrategyError, match="takes no option transfer"):
        create("random", 0, transfer="x.jsonl.gz")



def _counting(space):
    """Counts ``space.why_invalid`` calls: draws checked and configurations listed."""
    calls = [0]
    check = space.why_invalid

    def counted(config):
        calls[0] += 1
        return check(config)

    space.why_invalid = counted
    return calls


def _einsum_context():
    op = registry.load("einsum_sum")
    problem = op.problem(t=8192, k=8192, h=16, d=128, dtype="bfloat16")
    return SearchContext(op, problem, op.space(problem, H100), H100, TuningDatabase(":memory:", "einsum"))


def _distinct_and_valid(space, proposals):
    return len({str(sorted(p.config.items())) for p in proposals}) == len(proposals) and \
        all(space.is_valid(p.config) for p in proposals)


def test_propose_on_a_heavily_constrained_space_is_quick():
    # einsum_sum pins the knobs an algorithm does not use, so 2898 of its 93312 raw configurations
    # are valid, fewer than the pool: each round drew 4 x 4096 valid configurations by rejection
    # (over 500k checks, 44 s a round); now sampling gives up early and the valid ones are
    # listed once, which no later round repeats
    context = _einsum_context()
    space = context.space
    strategy = XGBStrategy(0, auto_transfer=False)
    assert space.size > strategy.max_listed  # too large to list up front: the first round samples
    calls = _counting(space)
    first = strategy.propose(context, 4)
    checked = calls[0]
    assert checked <= 1.1 * space.size  # about one listing of the space
    second = strategy.propose(context, 4)
    assert calls[0] == checked
    assert len(first) == len(second) == 4
    assert _distinct_and_valid(space, first) and _distinct_and_valid(space, second)


def test_sampling_a_space_too_large_to_list_stops_at_max_draws():
    context = _einsum_context()
    strategy = XGBStrategy(0, auto_transfer=False, max_draws=4096, max_listed_sparse=0)
    calls = _counting(context.space)
    proposals = strategy.propose(context, 4)
    assert calls[0] == 4096  # the round scores the ~130 valid configurations those draws found
    assert len(proposals) == 4 and _distinct_and_valid(context.space, proposals)


def test_a_space_that_sampling_serves_well_is_not_listed():
    op = registry.load("gemm")
    problem = op.problem(m=8192, n=8192, k=8192, dtype="float16")  # 30096 valid of 77760
    space = op.space(problem, H100)
    strategy = XGBStrategy(0, auto_transfer=False)
    calls = _counting(space)
    proposals = strategy.propose(SearchContext(op, problem, space, H100, TuningDatabase(":memory:", "gemm")), 4)
    assert space.size > strategy.max_listed and not strategy.listed
    assert calls[0] < strategy.max_draws and _distinct_and_valid(space, proposals)
