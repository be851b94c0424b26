"""Kernel Tuner's and Optuna's strategies on replay datasets (experiments/field_benchmark.py)."""

import functools
import json
import statistics
import tempfile
from pathlib import Path

import pytest

from tilesearch import dataset
from tilesearch.experiment import field as fb
from tilesearch.experiment import kernel_tuner as kts
from tilesearch.experiment import peer_runs
from tilesearch.experiment import replay_runs as rr
from tilesearch.experiment import scores as sc
from tilesearch.experiment import strategies as sb
from tilesearch.space import config_key
from tilesearch.testing.synthetic import synthetic_dataset

KNOBS = {"block_m": (64, 128), "block_n": (64, 128, 256), "block_k": (32, 64), "num_stages": (2, 3), "threads": (128, 256),
         "panel_size": (0,), "warp_policy": ("square", "full_row")}


def _as_data(path, problem):
    """A synthetic dataset relabelled so that the benchmarks take it (they refuse GPU ``synthetic``)."""
    d = synthetic_dataset(path, problem, KNOBS)
    return dataset.write(path, {**d.meta, "gpu": "test-gpu", "target": {**d.meta["target"], "gpu": "test-gpu"}}, d.rows)


@pytest.fixture
def data_dir(tmp_path):
    _as_data(tmp_path / "a.jsonl.gz", {"m": 4096, "n": 4096, "k": 4096})
    _as_data(tmp_path / "b.jsonl.gz", {"m": 2048, "n": 2048, "k": 8192})
    return tmp_path


def test_export_is_a_cache_kernel_tuner_reads(data_dir, tmp_path):
    from kernel_tuner import util

    data = dataset.load(data_dir / "a.jsonl.gz")
    cache = kts.export(data, tmp_path / "a.json")
    read = util.read_cache(str(cache.path), open_cache=False)
    assert read["tune_params_keys"] == list(data.knobs) and read["tune_params"]["warp_policy"] == [0, 1]
    assert len(read["cache"]) == len(data)
    for values, row in cache.rows.items():
        entry = read["cache"][",".join(map(str, values))]
        assert row.config["warp_policy"] == KNOBS["warp_policy"][entry["warp_policy"]]
        if row.ok:
            assert entry["time"] == row.latency_ms and "__error__" not in entry
        else:  # failures are in the space and cost an evaluation, as in tilesearch
            assert isinstance(entry["__error__"], util.CompilationFailedConfig)
        assert entry["compile_time"] == pytest.approx(1e3 * row.compile_s)
    assert any(not r.ok for r in data.rows)  # the fixture has failures to check


def test_kernel_tuner_runs_count_unique_evaluations_and_are_seeded(data_dir, tmp_path):
    data = dataset.load(data_dir / "a.jsonl.gz")
    cache = kts.export(data, tmp_path / "a.json")
    rows, seconds = kts.run(cache, "genetic_algorithm", 3, max_fevals=12)
    assert 0 < len(rows) <= 12 and seconds > 0
    assert len({config_key(r.config) for r in rows}) == len(rows)
    assert all(data.get(r.config) is r for r in rows)
    again, _ = kts.run(cache, "genetic_algorithm", 3, max_fevals=12)
    other, _ = kts.run(cache, "genetic_algorithm", 4, max_fevals=12)
    assert [r.config for r in again] == [r.config for r in rows] != [r.config for r in other]
    lhs, _ = kts.run(cache, "diff_evo", 3, max_fevals=12)  # its first population is an unseeded LHS in 1.5.0
    assert [r.config for r in lhs] == [r.config for r in kts.run(cache, "diff_evo", 3, max_fevals=12)[0]]
    everything, _ = kts.run(cache, "random_sample", 0, max_fevals=len(data))
    assert len(everything) == len(data)  # failed rows included: the space is the dataset's rows


def test_optuna_cmaes_run_measures_distinct_rows_up_to_the_cap(data_dir):
    data = dataset.load(data_dir / "a.jsonl.gz")
    run = fb.optuna_run(data, "cmaes", 0, horizon=10, cap=10)
    assert len(run.tflops) == 10
    assert run.tflops == fb.optuna_run(data, "cmaes", 0, horizon=10, cap=10).tflops


def test_field_benchmark_end_to_end(data_dir, tmp_path):
    out = tmp_path / "out"
    assert fb.main(["--data", str(data_dir), "--out", str(out), "--seeds", "2", "--min-horizon", "4",
                    "--strategies", "random,xgb,xgb+transfer,cmaes,kt:random_sample,kt:genetic_algorithm,kt:bayes_opt,"
                    "kt:diff_evo/reversed",
                    "--caches", str(tmp_path / "caches")]) == 0
    text = (out / "results.md").read_text()
    for name in ("random", "xgb", "cmaes", "kt:random_sample", "kt:genetic_algorithm", "kt:bayes_opt",
                 "kt:diff_evo/reversed"):
        assert f"| {name} | " in text
    assert "- a: fewest trials to 97%: " in text and "xgb fewest: " in text
    raw = json.loads((out / "results.json").read_text())
    assert len(raw["a"]["runs"]["kt:genetic_algorithm"]) == 2 and set(raw["verdicts"]) == {"a", "b"}
    assert sorted(p.name for p in (tmp_path / "caches").glob("*.json")) == [
        "a.json", "a_reversed.json", "b.json", "b_reversed.json"]


def _record(data_dir, tmp_path, strategies="xgb,cmaes,kt:random_sample"):
    rec = tmp_path / "peers.json.gz"
    assert fb.main(["--data", str(data_dir), "--out", str(tmp_path / "first"), "--seeds", "2", "--min-horizon", "4",
                    "--jobs", "1", "--strategies", strategies, "--record-peers", str(rec)]) == 0
    return rec


def test_recorded_peer_runs_are_served_and_only_ours_run(data_dir, tmp_path, monkeypatch):
    rec = _record(data_dir, tmp_path)
    record = peer_runs.Record.load(rec)
    assert [(d, s) for d, s, _, _ in record.entries()] == [
        ("a", "cmaes"), ("a", "kt:random_sample"), ("b", "cmaes"), ("b", "kt:random_sample")]  # ours are not kept
    entry = record.datasets["a"]["runs"]["cmaes"]
    assert entry[next(iter(entry))]["recorded"]["command"].startswith("python experiments/field_benchmark.py --data")

    def never(*args, **kwargs):
        raise AssertionError("a recorded peer was run again")

    monkeypatch.setattr(fb, "optuna_run", never)  # one process (--jobs 1): the patches are here
    monkeypatch.setattr(kts, "run", never)
    assert fb.main(["--data", str(data_dir), "--out", str(tmp_path / "again"), "--seeds", "2", "--min-horizon", "4",
                    "--jobs", "1", "--strategies", "xgb,cmaes,kt:random_sample", "--peers", str(rec)]) == 0
    first, again = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("first", "again"))
    for name in ("cmaes", "kt:random_sample"):
        assert again["a"]["runs"][name] == first["a"]["runs"][name]  # the same trials and the same scores
    assert list(again["a"]["runs"]) == ["xgb", "cmaes", "kt:random_sample"]
    # xgb ran again: its trials are the same, its score not (it counts xgb's own measured seconds)
    assert ([r["trials_to_97"] for r in again["a"]["runs"]["xgb"]] == [r["trials_to_97"] for r in first["a"]["runs"]["xgb"]]
            and {d: v["fewest_t97"] for d, v in again["verdicts"].items()}
            == {d: v["fewest_t97"] for d, v in first["verdicts"].items()})
    # a peer the record lacks, or one recorded with fewer seeds than asked for, is run
    with pytest.raises(AssertionError, match="run again"):
        fb.main(["--data", str(data_dir), "--out", str(tmp_path / "more"), "--seeds", "3", "--min-horizon", "4",
                 "--jobs", "1", "--strategies", "cmaes", "--peers", str(rec)])


def test_a_record_that_no_longer_fits_is_refused_in_one_line(data_dir, tmp_path, capsys, monkeypatch):
    rec = _record(data_dir, tmp_path, "kt:random_sample")
    record = peer_runs.Record.load(rec)
    assert record.stale(dataset.load_dir(data_dir)) == []
    data = dataset.load(data_dir / "a.jsonl.gz")
    dataset.write(data_dir / "a.jsonl.gz", {**data.meta, "notes": "measured again"}, data.rows)
    capsys.readouterr()
    assert fb.main(["--data", str(data_dir), "--out", str(tmp_path / "o"), "--peers", str(rec)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "a: the dataset changed since it was recorded" in err and "--record-peers" in err
    monkeypatch.setattr(peer_runs, "versions", lambda: {**record.meta["versions"], "cmaes": "9.9"})
    assert f"cmaes {record.meta['versions']['cmaes']} recorded, 9.9 installed" in record.stale([])


def test_verify_names_a_recorded_run_that_the_peer_no_longer_makes(data_dir, tmp_path):
    rec = _record(data_dir, tmp_path, "cmaes,kt:random_sample")
    record = peer_runs.Record.load(rec)
    datasets = dataset.load_dir(data_dir)
    assert peer_runs.verify(record, datasets, ["cmaes", "kt:random_sample"], fb.Runs(tmp_path)) == []
    # pairs in sorted order check seeds 0, 1, 0, 1: b's CMA-ES is pair 2, so seed 0
    entry = record.datasets["b"]["runs"]["cmaes"]
    runs = entry[next(iter(entry))]["runs"]
    runs[0]["tflops"][3] = 1e9
    assert peer_runs.verify(record, datasets, ["cmaes", "kt:random_sample"], fb.Runs(tmp_path)) == [
        f"b cmaes seed 0: measured {len(runs[0]['tflops'])} rows, recorded {len(runs[0]['tflops'])}; "
        "they differ from row 4"]


def test_unknown_kernel_tuner_strategy_is_refused(data_dir, tmp_path, capsys):
    assert fb.main(["--data", str(data_dir), "--out", str(tmp_path / "o"), "--strategies", "kt:nope"]) == 2
    assert "unknown Kernel Tuner strategies" in capsys.readouterr().err


def test_verdict_says_when_another_strategy_beats_xgb():
    def runs(name, hits):  # a run per seed, reaching the best at trial ``hit`` (None: never, in 30)
        return [rr.Run(name, s, [1.0] * (h - 1) + [2.0] if h else [1.0] * 30,
                       [2.0] * (h - 1) + [1.0] if h else [2.0] * 30, [1.0] * (h or 30), 0.0)
                for s, h in enumerate(hits)]

    outcome = rr.Outcome("d", 100, 2.0, runs={"xgb": runs("xgb", [9, 10, 11]), "kt:pso": runs("kt:pso", [5, 6, 7]),
                                             "xgb+transfer": runs("xgb+transfer", [1, 1, 1])})
    outcome.scores = {"xgb": [0.5] * 3, "kt:pso": [0.4] * 3, "xgb+transfer": [0.9] * 3}
    v = fb.verdicts([outcome])["d"]
    assert v["fewest_t97"] == ["kt:pso"] and not v["xgb_fewest"]  # transfer is xgb's own variant: not counted
    assert v["best_score"] == ["xgb"] and v["xgb_best_score"]
    outcome.runs["kt:pso"] = runs("kt:pso", [20, None, None])
    assert fb.verdicts([outcome])["d"]["xgb_fewest"]


def test_reversed_export_lists_values_in_reverse_and_keeps_the_rows(data_dir, tmp_path):
    data = dataset.load(data_dir / "a.jsonl.gz")
    cache = kts.export(data, tmp_path / "r.json", reverse=True)
    assert cache.tune_params["block_n"] == [256, 128, 64] and cache.tune_params["warp_policy"] == [0, 1]
    assert cache.encode["warp_policy"] == {"full_row": 0, "square": 1}
    assert sorted(map(str, cache.rows.values())) == sorted(map(str, data.rows))


# -- issue 19 on the committed replay datasets (the real H100 sweeps) --------------------------

DATA = Path(__file__).resolve().parents[1] / "experiments" / "data"
PEERS = Path(__file__).resolve().parents[1] / "experiments" / "results" / "field" / "peer_runs.json.gz"
"""The other tuners' runs on the committed datasets (:mod:`tilesearch.experiment.peer_runs`),
written by the commands that each entry names (README, "Search against the field")."""


FIELD = ["xgb", "cmaes"] + [kts.PREFIX + n for n in kts.STRATEGIES] + ["kt:diff_evo/reversed"]
# einsum-sum's sweep: 30 seeds, since 1.4% of its rows are within 3% of the best and seeds 0-9 alone
# give Kernel Tuner's uniform random sampling a median of 11 trials where 200 seeds give 56
# (RESULTS.md, "The einsum-sum sweep, complete"); a budget of 10% of the sweep keeps CMA-ES's 30 runs
# to minutes. The GEMM datasets keep 10 seeds and the default 30% budget.
SPARSE_TARGET = ["--seeds", "30", "--max-share", "0.1"]
GP_CAP = 40
"""Trials a GP run gets: issue 19's budget on the full spaces. On the 2-core machine GPSampler
fits for every ask, 0.13 s a trial at 170 trials and more beyond, too slow for the field's whole
budgets (RESULTS.md has those runs)."""


@functools.cache
def _committed():
    """The committed datasets, read once for the tests below (about a second a read)."""
    datasets = [d for d in dataset.load_dir(DATA) if d.meta.get("gpu") != "synthetic"]
    assert len(datasets) >= 4, f"expected the committed replay datasets in {DATA}"
    return datasets


def _settings(datasets, strategies, argv, sparse=SPARSE_TARGET):
    """(datasets, the benchmark's arguments) of each part of the field: the GEMM datasets with
    ``argv``, the others with ``sparse`` after it."""
    parts = []
    for chosen, extra in (([d for d in datasets if d.op == "gemm"], []),
                          ([d for d in datasets if d.op != "gemm"], sparse)):
        if chosen:
            args = fb.build_parser().parse_args(["--strategies", ",".join(strategies), *argv, *extra])
            args.strategies = list(strategies)
            parts.append((chosen, args))
    return parts


GP_ARGV = ["--horizon", "0", "--min-horizon", str(GP_CAP), "--max-share", "0"]
GP_SPARSE = SPARSE_TARGET[:2]  # the field's seeds; the cap is GP_CAP


@pytest.fixture(scope="module")
def record():
    """The committed record of the peers' runs, checked to fit the committed datasets and the
    peers installed, and to hold every peer run that the tests below compare with."""
    datasets = _committed()
    rec = peer_runs.Record.load(PEERS)
    how = "record them again with the commands in README's 'Search against the field'"
    stale = rec.stale(datasets)
    assert not stale, f"{PEERS.name}: {'; '.join(stale)}; {how}"
    for strategies, argv, sparse in ((FIELD, [], SPARSE_TARGET), (["gp"], GP_ARGV, GP_SPARSE)):
        for chosen, args in _settings(datasets, strategies, argv, sparse):
            missing = [s for s in args.strategies if fb.peer(s) and not peer_runs.complete(rec, chosen, s, args)]
            assert not missing, f"{PEERS.name} lacks {missing} at {argv or 'the default budget'}; {how}"
    return rec


def test_the_recorded_peer_runs_are_what_the_peers_do_now(record):
    """One seed of every recorded (dataset, peer, budget) run again (each pair another seed):
    the rows measured, in order, are the record's. This is what lets the field's verdicts below
    take the peers' runs from the record and run only ours.

    Kernel Tuner's Bayesian optimization is left out: its runs are not the same twice on this
    machine. On 2026-12-03, with the peers' recorded versions, two runs of this test (on that
    day's tree, and on the tree that recorded) found other runs of it apart from the record, from
    row 24-32 on (gemm 1024x1024x14336 seed 1 and 8192^3 seed 7; 1024^3 seed 7), and no other
    peer's. Its recorded runs still serve the verdicts below, as one draw of its own.

    Kernel Tuner's dual annealing (SciPy's) is left out too: on a fresh machine of 2026-12-03
    (AMD EPYC, the same pinned Optuna, cmaes and Kernel Tuner) its einsum-sum run of seed 5 came
    out the same in every rerun but apart from the record from row 6 on, at 368bc7b as at this
    session's tree, and with SciPy 1.17.0 or 1.17.1, NumPy 2.4.1 or 2.4.6, python-constraint2
    2.8.0 or 2.9.0 alike; the record keeps no other package's version, so the cause is not
    found (the machine's floating-point path is one suspect). Its recorded runs serve the
    verdicts as bayes_opt's do."""
    checked = [s for s in FIELD + ["gp"] if fb.peer(s) and s not in ("kt:bayes_opt", "kt:dual_annealing")]
    with tempfile.TemporaryDirectory() as tmp:
        differ = peer_runs.verify(record, _committed(), checked, fb.Runs(Path(tmp)), jobs=2)
    assert not differ, "\n".join(differ)


def _field(strategies, argv, record, sparse=SPARSE_TARGET):
    outcomes = []
    for chosen, args in _settings(_committed(), strategies, argv, sparse):
        with tempfile.TemporaryDirectory() as tmp:
            outcomes += fb.compare(chosen, args, fb.Runs(Path(tmp)), record, log=lambda _: None)
    return outcomes


@pytest.fixture(scope="module")
def field(record):
    """xgb (run here), Optuna's CMA-ES and every Kernel Tuner strategy (differential evolution
    also on the values listed in reverse; from the record) on experiments/data: 10 seeds on the
    GEMM datasets, 30 on the others."""
    return _field(FIELD, [], record)


def test_xgb_needs_the_fewest_trials_to_97_and_has_the_highest_score_on_every_committed_dataset(field):
    """Issue 19 against the field: median trials to 97% (over 10 or 30 seeds, see ``field``) no
    higher than any other strategy's (Kernel Tuner's, Optuna's CMA-ES), and the highest mean
    Willemsen score."""
    verdicts = fb.verdicts(field)
    missed = [f"{name}: fewest {v['fewest_t97']} ({v['t97']:g}), best score {v['best_score']} ({v['score']:.3f})"
              for name, v in verdicts.items() if not (v["xgb_fewest"] and v["xgb_best_score"])]
    assert len(verdicts) >= 4 and not missed, "\n".join(missed)


def test_xgb_needs_fewer_trials_than_optunas_gp_on_every_committed_dataset(field, record):
    """Optuna's GP sampler (each proposal measured at the nearest untried configuration; from
    the record), with the seeds of ``field``, up to :data:`GP_CAP` trials a run. A run that does
    not reach 97% of the best within the cap counts as never reaching it, so GP's median is exact
    up to the cap and a lower bound beyond it: enough to say that ``xgb`` needs fewer."""
    gp = {o.dataset: o.runs["gp"] for o in _field(["gp"], GP_ARGV, record, GP_SPARSE)}
    behind = []
    for outcome in field:
        runs = gp[outcome.dataset]
        assert len(runs) == len(outcome.runs["xgb"]) and all(len(r.tflops) == GP_CAP for r in runs)
        gp_t97 = statistics.median(r.trials_to(0.97, outcome.best_tflops) for r in runs)
        xgb_t97 = statistics.median(r.trials_to(0.97, outcome.best_tflops) for r in outcome.runs["xgb"])
        if not xgb_t97 < gp_t97:
            behind.append(f"{outcome.dataset}: xgb {xgb_t97:g}, gp {gp_t97:g}")
    assert len(field) >= 4 and not behind, "\n".join(behind)


FULL = [d for d in dataset.load_dir(DATA) if d.meta.get("gpu") != "synthetic" and sc.full_space(d)]


@pytest.mark.skipif(not FULL, reason="no full-space dataset committed yet: issue 19's recordings need the GPU "
                                     "host (RESULTS.md, 'Datasets of the full spaces')")
def test_xgb_reaches_97_percent_on_the_full_spaces_within_the_issues_budgets(field):
    """Issue 19 on the full spaces: median trials to 97% of the best known within 40 (15 with
    transfer) on a GEMM sample, within 3% of the size on an einsum-sum sweep; 10 seeds.

    ``xgb``'s runs are the field's first 10 seeds: on a GEMM sample those are the runs of the
    default budget; on the einsum-sum sweep the field caps them at 10% of it, and a run is the same
    up to its cap (the cap only stops it), so its trials to 97% are too where they are within
    it, and past the cap they are past the 3% target either way. ``xgb+transfer`` runs here, each
    GEMM sample warm-started from the nearest other full-space dataset, as with the default budget."""
    args = fb.build_parser().parse_args(["--strategies", "xgb+transfer"])
    args.strategies = ["xgb+transfer"]
    outcomes = sb.benchmark(FULL, args, log=lambda _: None)
    xgb = {o.dataset: o for o in field}
    for outcome in outcomes:
        outcome.runs["xgb"] = xgb[outcome.dataset].runs["xgb"][:args.seeds]
    found = sc.full_space_targets(list(zip(FULL, outcomes)))
    missed = [f"{name}: {goal} ({why})" for name, got in found.items() for goal, (ok, why) in got.items() if not ok]
    assert found and not missed, "\n".join(missed)
    assert all("xgb within" in " ".join(got) for got in found.values()) and len(found) == len(FULL)


def test_full_space_targets_fail_when_a_median_misses(data_dir):
    data = dataset.load(data_dir / "a.jsonl.gz")
    assert not sc.full_space(data)  # a GEMM sweep of the sub-space
    sampled = type("D", (), {"sampled": True, "op": "gemm"})()
    sweep = type("D", (), {"sampled": False, "op": "einsum_sum"})()

    def outcome(hit):
        runs = [rr.Run("xgb", s, [1.0] * (hit - 1) + [2.0], [2.0] * (hit - 1) + [1.0], [1.0] * hit, 0.0) for s in range(3)]
        return rr.Outcome("d", 1000, 2.0, runs={"xgb": runs})

    assert sc.full_space_targets([(sampled, outcome(40))])["d"] == {"xgb within 40": (True, "40 <= 40")}
    assert sc.full_space_targets([(sampled, outcome(41))])["d"]["xgb within 40"][0] is False
    assert sc.full_space_targets([(sweep, outcome(31))])["d"] == {"xgb within 30": (False, "31 <= 30")}
    assert sc.full_space_targets([(data, outcome(1))]) == {}
    # the report checks issue 19's targets on a whole space, issue 3's on a sub-space sweep
    assert sc.checks([outcome(12)], [sampled])[2] == "- d: xgb within 40: True (12 <= 40)"
    assert "xgb within 3% of size: True" in sc.checks([outcome(12)], [data])[2]


def test_a_kernel_tuner_strategy_that_raises_is_reported_and_the_others_go_on(data_dir, tmp_path, monkeypatch):
    real = kts.run

    def run(cache, strategy, seed, **kw):
        if strategy == "greedy_ils":
            raise TypeError("'NoneType' object is not iterable")
        return real(cache, strategy, seed, **kw)

    monkeypatch.setattr(kts, "run", run)
    out = tmp_path / "out"
    assert fb.main(["--data", str(data_dir), "--out", str(out), "--seeds", "1", "--min-horizon", "4", "--jobs", "1",
                    "--strategies", "xgb,kt:greedy_ils,kt:random_sample"]) == 0  # one process: the patch is here
    text = (out / "results.md").read_text()
    assert "- kt:greedy_ils on a: raised TypeError: 'NoneType' object is not iterable (seed 0)" in text
    raw = json.loads((out / "results.json").read_text())
    assert raw["a"]["runs"]["kt:greedy_ils"][0]["measured"] == 0 and raw["a"]["runs"]["kt:random_sample"][0]["measured"] > 0


def test_cmaes_on_a_sparse_sample_falls_back_to_untried_rows_as_tilesearchs_loop_does(data_dir, tmp_path):
    full = dataset.load(data_dir / "a.jsonl.gz")
    ok = [r for r in full.rows if r.ok]
    rows = ok[::12]  # a sample of the space: most of what CMA-ES asks for is not in it
    sparse = dataset.write(tmp_path / "sparse.jsonl.gz", {**full.meta, "sample": {"method": "uniform", "seed": 0,
                                                                                 "uniform": len(rows), "planned": len(rows)}}, rows)
    assert sparse.sampled and len(ok) > 5 * len(rows)
    run = fb.optuna_run(sparse, "cmaes", 0, horizon=len(rows), cap=len(rows))
    assert len(run.tflops) == len(rows)  # every row measured within the budget of asks


def test_a_kernel_tuner_run_past_its_time_limit_raises(data_dir, tmp_path, monkeypatch):
    import kernel_tuner

    def stuck(*args, **kwargs):
        import time

        time.sleep(30)

    monkeypatch.setattr(kernel_tuner, "tune_kernel", stuck)
    cache = kts.export(dataset.load(data_dir / "a.jsonl.gz"), tmp_path / "a.json")
    with pytest.raises(TimeoutError, match="within 0.5 s"):
        kts.run(cache, "greedy_ils", 0, max_fevals=10, time_limit=0.5)


def test_nearest_untried_counts_rank_steps_of_numeric_knobs_and_mismatches_of_others():
    from tilesearch.space import Categorical, PowerOfTwo, Space

    space = Space([PowerOfTwo("block_m", 32, 256), Categorical("policy", ("a", "b"))])
    rows = [dataset.Row(config={"block_m": m, "policy": p}, status="ok", latency_ms=1.0)
            for m, p in [(64, "b"), (32, "a"), (256, "a")]]
    # 128 with policy a: 256/a is one rank step of three away (1/3), 32/a two (2/3), 64/b one and a mismatch (4/3)
    near = fb.nearest_untried(space, {"block_m": 128, "policy": "a"}, rows, {})
    assert near.config == {"block_m": 256, "policy": "a"}
    seen = {config_key(near.config): near}
    assert fb.nearest_untried(space, {"block_m": 128, "policy": "a"}, rows, seen).config == {"block_m": 32, "policy": "a"}
    assert fb.nearest_untried(space, {"block_m": 128, "policy": "a"}, rows, {config_key(r.config): r for r in rows}) is None


def test_optuna_gp_measures_one_untried_row_per_ask_even_on_a_sparse_sample(data_dir, tmp_path, monkeypatch):
    # asked and told as CMA-ES is, GPSampler proposed rejected and repeated configurations again
    # and again, fitting its model for each ask
    full = dataset.load(data_dir / "a.jsonl.gz")
    rows = [r for r in full.rows if r.ok][::4]
    sparse = dataset.write(tmp_path / "sparse.jsonl.gz", {**full.meta, "sample": {"method": "uniform", "seed": 0,
                                                                                 "uniform": len(rows), "planned": len(rows)}}, rows)
    asks, real = [], fb.nearest_untried
    monkeypatch.setattr(fb, "nearest_untried", lambda *a: (asks.append(1), real(*a))[1])
    run = fb.optuna_run(sparse, "gp", 0, horizon=15, cap=15)
    assert len(run.tflops) == 15 and len(asks) == 15  # one ask a measured row, every one new
