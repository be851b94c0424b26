"""Bucket selection from measured tables (synthetic numbers; nothing here is a measurement)."""

import math

import pytest

from tilesearch.buckets import (
    Bucket,
    Table,
    bucket_of,
    config_key,
    cover,
    crossing,
    edge,
    held_out,
    next_sizes,
    probe_sizes,
)

SMALL, LARGE, MIDDLE = {"block_m": 64, "split_k": 4}, {"block_m": 128, "split_k": 1}, {"block_m": 128, "split_k": 2}


def table(rows):
    """rows: size -> {config (as a tuple of items): ms}."""
    t = Table()
    for size, row in rows.items():
        t.latency[size] = {}
        for items, ms in row.items():
            config = dict(items)
            t.latency[size][config_key(config)] = ms
            t.configs[config_key(config)] = config
    return t


S, L, M = tuple(SMALL.items()), tuple(LARGE.items()), tuple(MIDDLE.items())


def test_one_configuration_that_is_good_everywhere_makes_one_bucket():
    t = table({1: {S: 1.0, L: 1.02}, 64: {S: 2.0, L: 2.0}, 4096: {S: 9.5, L: 8.9}})
    [bucket] = cover(t, 1, 4096, tolerance=0.03)
    assert (bucket.lo, bucket.hi, bucket.config, bucket.tuned) == (1, 4096, LARGE, (1, 64, 4096))
    assert bucket.worst_loss == pytest.approx(0.02)


def test_a_change_of_winner_splits_at_the_geometric_mean():
    t = table({1: {S: 1.0, L: 1.5}, 16: {S: 1.1, L: 1.6}, 1024: {S: 30.0, L: 10.0}, 16384: {S: 400.0, L: 100.0}})
    small, large = cover(t, 1, 16384, tolerance=0.03)
    assert (small.lo, small.hi, small.config, small.tuned) == (1, 128, SMALL, (1, 16))
    assert (large.lo, large.hi, large.config, large.tuned) == (129, 16384, LARGE, (1024, 16384))
    assert small.worst_loss == 0.0 and large.worst_loss == 0.0


def test_tolerance_decides_between_fewer_buckets_and_less_loss():
    t = table({1: {S: 1.0, L: 1.05}, 64: {S: 1.1, L: 1.0}})
    assert [b.config for b in cover(t, 1, 64, tolerance=0.03)] == [SMALL, LARGE]
    [one] = cover(t, 1, 64, tolerance=0.06)
    assert one.config == LARGE and one.worst_loss == pytest.approx(0.05)


def test_a_configuration_not_measured_at_a_size_does_not_cover_it():
    t = table({1: {S: 1.0, L: 1.0}, 8: {S: 1.0}, 64: {S: 1.0, L: 1.0}})
    [bucket] = cover(t, 1, 64, tolerance=0.0)
    assert bucket.config == SMALL


def test_the_greedy_cover_is_the_fewest_buckets():
    # M covers 1..3 sizes in the middle; S the first two, L the last two: S | M | L would be 3,
    # the greedy must find S then M.. covering to the end if it can
    t = table({1: {S: 1.0, M: 2.0}, 2: {S: 1.0, M: 1.0}, 3: {S: 5.0, M: 1.0, L: 1.0}, 4: {M: 1.0, L: 1.0}})
    found = cover(t, 1, 10, tolerance=0.0)
    assert [b.config for b in found] == [SMALL, MIDDLE] and [b.tuned for b in found] == [(1, 2), (3, 4)]
    assert found[-1].hi == 10 and found[0].lo == 1


def test_edges_and_lookup():
    assert edge(16, 1024) == 128 and edge(1, 2) == 1 and edge(7, 8) == 7
    buckets = [Bucket(1, 128, SMALL), Bucket(129, 4096, LARGE)]
    assert [bucket_of(buckets, s) for s in (1, 128, 129, 4096)] == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="outside the buckets 1..4096"):
        bucket_of(buckets, 5000)


def test_the_edge_lies_where_the_two_configurations_latencies_cross():
    # small tiles: 1.0 ms at 100, 3.0 at 1000; large tiles: 1.5 and 2.0. Along straight lines
    # they cross at 400; the geometric mean of 100 and 1000 (316) would serve 317..400 with the
    # configuration 1.2x slower there
    t = table({100: {S: 1.0, L: 1.5}, 1000: {S: 3.0, L: 2.0}})
    small, large = config_key(SMALL), config_key(LARGE)
    assert crossing(t, 100, 1000, small, large, lambda key, size: size) == 400
    assert [(b.lo, b.hi) for b in cover(t, 1, 4096, 0.03, lambda key, size: size)] == [(1, 400), (401, 4096)]
    assert [(b.lo, b.hi) for b in cover(t, 1, 4096, 0.03)] == [(1, 316), (317, 4096)]


def test_the_edge_follows_the_models_tile_steps_from_one_figure_and_falls_back_without_any():
    # modelled time steps with M's tiles: 128-row tiles at 128 and 1024 are 1 and 8 tiles, 256-row
    # ones 1 and 4; at 129 the small tile's second row of tiles costs as much as a whole step
    t = table({128: {S: 1.0, L: 1.5}, 1024: {S: 8.0, L: 6.0}})
    rows = {config_key(SMALL): 128, config_key(LARGE): 256}
    steps = lambda key, size: math.ceil(size / rows[key])  # noqa: E731
    assert crossing(t, 128, 1024, config_key(SMALL), config_key(LARGE), steps) == 128
    assert edge(128, 1024) == 362
    # L not measured at 128 (pruned there): drawn from its 6.0 ms at 1024 along the model, 1.5 ms a
    # 256-row step, so it still takes over at 129
    one = table({128: {S: 1.0}, 1024: {S: 8.0, L: 6.0}})
    assert crossing(one, 128, 1024, config_key(SMALL), config_key(LARGE), steps) == 128
    assert crossing(one, 128, 1024, config_key(SMALL), config_key(LARGE), None) == 362  # no model
    none = table({128: {S: 1.0}, 1024: {S: 8.0}})
    assert crossing(none, 128, 1024, config_key(SMALL), config_key(LARGE), steps) == 362


def test_next_sizes_refine_where_the_winner_changes_or_the_gap_is_wide():
    buckets = [Bucket(1, 128, SMALL, (1, 16)), Bucket(129, 16384, LARGE, (1024, 16384))]
    # 16 | 1024 changes bucket (ratio 64); 1024 -> 16384 is wider than 8 inside one bucket; 1 -> 16 too
    assert next_sizes(buckets, [1, 16, 1024, 16384], 2) == [128, 4096]
    assert next_sizes(buckets, [1, 16, 1024, 16384], 0) == []
    assert next_sizes([Bucket(1, 5, SMALL, (4,)), Bucket(6, 9, LARGE, (5,))], [4, 5], 3) == []  # adjacent


def test_next_sizes_go_first_where_the_best_latency_grows_most():
    """The H100 range of 2026-11-26 in miniature: below 128 rows every configuration runs alike
    (a flat low end), above it the time grows. The gaps are about equally wide, so width alone
    refines the low end first (as that run did); the best latencies say 1448..16384 (11x), then
    128..1448 (9x, where S also loses 56%), and the flat 11..128 last."""
    t = table({1: {S: 1.00, L: 1.05}, 11: {S: 1.00, L: 1.05}, 128: {S: 1.00, L: 1.05},
               1448: {S: 14.0, L: 9.0}, 16384: {S: 160.0, L: 100.0}})
    buckets = cover(t, 1, 16384, 0.03)
    assert [b.tuned for b in buckets] == [(1, 11, 128), (1448, 16384)]
    sizes = [1, 11, 128, 1448, 16384]
    assert next_sizes(buckets, sizes, 1) == [37]  # by width: 11..128 (ratio 11.6 > 11.3 > 11), as the run did
    assert next_sizes(buckets, sizes, 3, t) == [4870, 430, 37]
    # a winner not measured at the other end is the largest unknown: refined first
    unknown = table({1: {S: 1.0, L: 1.05}, 128: {S: 1.0}, 16384: {S: 160.0, L: 100.0}})
    assert next_sizes(cover(unknown, 1, 16384, 0.03), [1, 128, 16384], 1, unknown) == [1448]


def test_a_winner_pruned_at_the_other_end_is_judged_by_the_model_from_its_own_figure():
    """On the H100 the winner at 1 row (a configuration pruned at 128) had no figure at 128, so
    gap 1..128 counted as unknown and was refined before 128..1448, where S lost 56%."""
    t = table({1: {M: 1.0, S: 1.01}, 128: {S: 1.0, L: 1.05}, 1448: {S: 14.0, L: 9.0}})
    buckets = [Bucket(1, 11, MIDDLE, (1,)), Bucket(12, 400, SMALL, (128,)), Bucket(401, 1448, LARGE, (1448,))]
    assert next_sizes(buckets, [1, 128, 1448], 1, t) == [11]  # unknown: first
    flat = lambda key, size: 1.0  # noqa: E731 - a model where M's time does not change below 128 rows
    assert next_sizes(buckets, [1, 128, 1448], 1, t, flat) == [430]  # M drawn at 1.0 ms at 128: no loss
    costly = lambda key, size: size if key == config_key(MIDDLE) else 1.0  # noqa: E731
    # M drawn 128x slower at 128: a figure, so the growth decides, as where the crossed loss was
    # measured (the probes place the edge between 1 and 128)
    assert next_sizes(buckets, [1, 128, 1448], 1, t, costly) == [430]


def test_a_gap_inside_one_bucket_is_refined_where_the_best_latency_grows():
    """430..1448 and 1448..16384 lie in L's bucket and are narrower than MAX_GAP_RATIO, but the
    best latency grows 3.3x and 10x across them; 1..128 is 128x wide and flat (every tile loads
    the same weights), so it comes last."""
    t = table({1: {L: 1.00, S: 1.01}, 128: {L: 1.02, S: 1.03}, 430: {L: 3.00, S: 30.0},
               1448: {L: 10.0, S: 40.0}, 16384: {L: 100.0}})
    sizes = [1, 128, 430, 1448, 16384]
    buckets = cover(t, 1, 16384, 0.03)
    assert [b.tuned for b in buckets] == [tuple(sizes)]
    assert next_sizes(buckets, sizes, 3, t) == [4870, 789, 234]
    assert next_sizes(buckets, sizes, 5, t)[-1] == 11  # the flat end: only by width, last
    # no table, so no growth: only the gaps wider than MAX_GAP_RATIO, by width
    assert next_sizes(buckets, sizes, 3) == [11, 4870]


def test_probes_go_between_tuned_sizes_whose_winners_differ():
    t = table({1: {S: 1.00, L: 1.01}, 11: {S: 1.00, L: 1.01}, 128: {S: 1.00, L: 1.05},
               1448: {S: 14.0, L: 9.0}, 16384: {S: 160.0, L: 100.0}})
    buckets = cover(t, 1, 16384, 0.03)
    sizes = [1, 11, 128, 1448, 16384]
    # S serves 1..128, L the rest: 128 | 1448 is where S loses 56% (L 5%); inside a bucket only
    # the middles of gaps wider than UNMEASURED_RATIO (1..11, 11..128, 1448..16384)
    assert probe_sizes(buckets, sizes, 2, t, 0.03) == [3, 37, 287, 645, 4870]
    assert probe_sizes(buckets, sizes, 1, t, 0.03) == [3, 37, 431, 4870]
    assert probe_sizes(buckets, sizes, 2, t, 0.6) == [3, 37, 430, 4870]
    assert probe_sizes(buckets, sizes, 0, t, 0.03) == []


def test_no_stretch_of_a_gap_stays_unmeasured_wider_than_the_limit():
    # the model's probes crowd one end of 1448..16384 (as on the H100 range of 4096x4096, which
    # then served 2049..16384 from the 16384-row winner alone): the widest stretch gets its middle
    t = table({1448: {S: 10.0, L: 9.0}, 16384: {S: 100.0, L: 100.0}})
    buckets = [Bucket(1448, 2048, L, (1448,)), Bucket(2049, 16384, S, (16384,))]
    near_1448 = lambda key, size: size * (2.0 if key == config_key(S) and size < 2048 else 1.0)  # noqa: E731
    probes = probe_sizes(buckets, [1448, 16384], 2, t, 0.03, near_1448)
    assert min(probes) < 2100 and 4000 < max(probes) < 8000


def test_held_out_sizes_are_spread_untuned_and_partly_odd():
    tuned = [1, 128, 1448, 16384]
    sizes = held_out(1, 16384, tuned, 8)
    assert len(sizes) == 8 and sizes == sorted(sizes) and not set(sizes) & set(tuned)
    assert all(1 <= s <= 16384 for s in sizes)
    assert sum(s % 2 for s in sizes) >= 4
    assert sizes[0] < 8 and sizes[-1] > 8192  # both ends of the log range are visited


def test_split_sizes_halve_stretches_whose_ends_disagree_and_leave_agreeing_ones():
    from tilesearch.buckets import SPLIT_RATIO, split_sizes

    t = Table(latency={1: {"a": 1.0, "b": 1.01}, 64: {"a": 1.0, "b": 1.02},  # a wins at both ends
                       1448: {"a": 2.0, "b": 2.3}, 5246: {"a": 8.0, "b": 7.0},  # a, then b: 14-15% apart
                       8000: {"a": 9.0, "b": 9.1}},  # a wins again, but 8000/5246 < SPLIT_RATIO
              configs={"a": {}, "b": {}})
    assert split_sizes(t, 0.03) == [math.isqrt(1448 * 5246)] and 8000 / 5246 < SPLIT_RATIO
    assert split_sizes(t, 0.2) == []  # within the tolerance, the ends agree
    del t.latency[64]["a"]  # a winner not measured at the other end counts as disagreeing
    assert split_sizes(t, 0.2) == [math.isqrt(1 * 64), math.isqrt(64 * 1448)]


def test_edge_sizes_measure_an_inner_edge_far_from_its_buckets_measured_sizes():
    """As on the H100's 4096x14336 range: 33..64 measured at 53 and 64, 65..128 at 128 alone."""
    from tilesearch.buckets import EDGE_RATIO, Bucket, edge_sizes

    spans = [(1, 16, (1, 11)), (17, 32, (19, 31)), (33, 64, (53, 64)), (65, 128, (128,)), (129, 512, (160, 430))]
    buckets = [Bucket(lo, hi, {}, tuned) for lo, hi, tuned in spans]
    # 53/33 and 128/65 are past EDGE_RATIO; 16/11 and 19/17 are not; 129 and 128 are neighbours;
    # 160/129 is within it; the range's own ends (1 and 512) are no bucket's inner edge
    assert edge_sizes(buckets) == [33, 65] and 53 / 33 > EDGE_RATIO > 16 / 11
    # a bucket with no measured size gets both its edges measured
    assert edge_sizes([Bucket(1, 10, {}, (1,)), Bucket(11, 20, {}), Bucket(21, 40, {}, (40,))]) == [10, 11, 20, 21]
    buckets[3] = Bucket(65, 128, {}, (65, 128))
    assert edge_sizes(buckets) == [33]


def test_modelled_sizes_look_between_measured_sizes_where_the_waves_of_two_tiles_part():
    """The figures of a 4096x4096 range on four H200s (2026-11-28, 14cc9b0): the 64x256 tile won at
    2099 and 3119 rows, the 256x128 tile 14.5% and 4.2% behind there, and 15.6% ahead at 2657."""
    from tilesearch import registry
    from tilesearch.buckets import modelled_sizes
    from tilesearch.range_tuner import _modelled
    from tilesearch.ranges import SizeRange
    from tilesearch.target import Target

    wide = {"block_m": 64, "block_n": 256, "block_k": 64, "num_stages": 4, "panel_size": 8}
    tall = {"block_m": 256, "block_n": 128, "block_k": 64, "num_stages": 3, "panel_size": 8}
    w, t = config_key(wide), config_key(tall)
    table = Table(latency={2099: {w: 0.12035, t: 0.13780}, 3119: {w: 0.17453, t: 0.18186}},
                  configs={w: wide, t: tall})
    shape = _modelled(registry.load("gemm"), SizeRange("m", 1, 16384),  # the range's own model
                      {"n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"}, table, Target.from_arch("sm_90a"))

    [bucket] = cover(table, 1, 16384, tolerance=0.01, shape=shape)
    assert bucket.config == wide  # the winner at both ends serves everything between
    [size] = modelled_sizes([bucket], table, 0.03, shape)
    assert 2625 <= size <= 3072  # 64x256 tiles in 6 waves of 132 SMs, 256x128 in 3
    # lines drawn without the tiles' waves see no loss between the two ends
    assert modelled_sizes([bucket], table, 0.03, lambda key, size: float(size)) == []
