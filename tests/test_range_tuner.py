"""A tuned range end to end on a synthetic runner (made-up latencies from
``tilesearch.testing.synthetic.gemm_latency``: the bookkeeping is tested, not a GPU): sizes
chosen, buckets from the cross-measured table, held-out regrets, the record in the storage, the
dispatch artifact (with nvcc) and the dispatching kernel under ``torch.compile(dynamic=True)``."""

import pytest
import torch

from tilesearch import range_tuner
from tilesearch.buckets import config_key
from tilesearch.cli import main
from tilesearch.database import HELDOUT_ATTR
from tilesearch.deploy import BadTensorError, load
from tilesearch.deploy.dispatch import Dispatch, export_range, read
from tilesearch.deploy.kernel import Kernel
from tilesearch.range_tuner import RangeSettings, certify, summary, tune_range
from tilesearch.registry import load as load_op
from tilesearch.target import Target
from tilesearch.testing.artifacts import meta_dispatch, symbolic_gemm_metadata
from tilesearch.testing.synthetic import SyntheticRunner, gemm_latency
from tilesearch.tuner import TuneSettings

SM90 = Target.from_arch("sm_90a", gpu="synthetic")
N, K = 1024, 2048


def runner(problem):
    return SyntheticRunner(lambda config: gemm_latency(problem.to_dict(), config, SM90), SM90)


def latency(m, config):
    return gemm_latency({"m": m, "n": N, "k": K, "dtype": "float16", "layout": "nt"}, config, SM90)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("range")
    settings = TuneSettings(strategy="random", trials=5, progress=False, storage=f"sqlite:///{root / 'db.sqlite'}")
    result = tune_range("gemm", {"m": "1..4096", "n": N, "k": K, "layout": "nt"}, settings=settings,
                        ranges=RangeSettings(sizes=4), runner=runner)
    certified = certify(result, settings=settings, heldout=4, runner=runner)
    return root, settings, result, certified


def test_sizes_include_the_ends_and_buckets_cover_the_range(tuned):
    _, _, result, _ = tuned
    sizes = list(result.studies)
    searched = [s for s in sizes if s not in result.probes]
    assert searched[0] == 1 and searched[-1] == 4096 and 64 in searched and len(searched) <= 4
    # probes lie strictly between searched sizes (buckets.probe_sizes, then buckets.split_sizes)
    gaps = [sum(a < p < b for p in result.probes) for a, b in zip(searched, searched[1:])]
    assert result.probes and sum(gaps) == len(result.probes)
    assert result.buckets[0].lo == 1 and result.buckets[-1].hi == 4096
    for before, after in zip(result.buckets, result.buckets[1:]):
        assert after.lo == before.hi + 1
    assert sorted(s for b in result.buckets for s in b.tuned) == sizes
    assert result.key == "m=1..4096,n=1024,k=2048,dtype=float16,layout=nt" and result.replayed


def test_probes_time_the_searched_sizes_winners_and_refits_then_search_a_few(tuned):
    from types import SimpleNamespace

    from tilesearch.database import TuningDatabase
    from tilesearch.ranges import problem_at
    from tilesearch.records import has_result
    from tilesearch.registry import load

    _, settings, result, _ = tuned
    searched = {s: SimpleNamespace(study=n) for s, n in result.studies.items() if s not in result.probes}
    winners = set(range_tuner._winners(searched, settings, range_tuner._margin(RangeSettings(tolerance=result.tolerance))))
    # what the searched sizes measured, their winners at probe time among them (cross-measuring the
    # winners of later rounds may push an earlier contender out of today's winners)
    # (each configuration once: the winners are cross-measured at every searched size)
    measured = {config_key(r.config): r.config for s in searched.values()
                for r in TuningDatabase(settings.storage, s.study).records()}
    winners |= set(measured)
    op, target = load("gemm"), Target.from_arch("sm_90a")
    probed = {size: TuningDatabase(settings.storage, result.studies[size]) for size in result.probes}
    configs_at = {size: {config_key(r.config) for r in db.records()} for size, db in probed.items()}
    refitted = searched_too = 0
    for size, db in probed.items():
        problem = problem_at(op, result.size_range, {k: v for k, v in result.params.items() if k != "m"}, size)
        space = op.space(problem, target)
        # a probe's refits are those of the configuration serving it then: one measured at a tuned size
        refits = {config_key(c) for config in measured.values()
                  for c in op.refits(problem, space, target, config, range_tuner.REFITS)}
        # what the trial budget counts, in order (the search's invalid proposals are recorded too;
        # later rounds' winners are cross-measured here after the probe, and at the searched sizes)
        keys = [config_key(r.config) for r in sorted(db.records(), key=lambda r: r.number) if has_result(r)]
        # the other probes' configurations: contenders found there are cross-measured here too
        elsewhere = set().union(*(configs_at[other] for other in result.probes if other != size))
        own = [k for k in keys if k not in winners | refits | elsewhere]  # the probe's search found these
        assert keys[0] in winners | refits and db.final() is None  # the hints first; no re-time
        assert len(set(keys)) == len(keys)
        # each probing of the size searches at most PROBE_SEARCH after its hints; a size probed again
        # in a later round (new winners to time there) searches again: one run of its own trials each
        runs, run = [], 0
        for k in keys:
            if k not in own:
                runs, run = runs + [run] if run else runs, 0
            else:
                run += 1
        runs += [run] if run else []
        assert all(r <= range_tuner.PROBE_SEARCH for r in runs), runs
        refitted += bool(set(keys) - winners)
        searched_too += bool(own)
    assert refitted  # some probe timed a refit that no searched size had measured
    assert searched_too  # and some probe's search measured what neither had


def test_a_size_about_to_be_tuned_is_hinted_the_best_of_its_nearest_tuned_size_valid_there():
    from types import SimpleNamespace

    from tilesearch.ranges import SizeRange

    swapped = {"block_m": 16, "block_n": 128, "block_k": 64, "num_stages": 4, "threads": 128, "panel_size": 0,
               "raster": "row", "warp_policy": "full_row", "split_k": 1, "persistent": False, "epilogue": "direct",
               "tma": True, "warp_specialize": "on", "swap_ab": True}
    square = {**swapped, "block_m": 64, "swap_ab": False}
    wide = {**swapped, "block_m": 128, "block_n": 256, "swap_ab": False, "num_stages": 3, "threads": 256}

    def result(config):
        return SimpleNamespace(best=[SimpleNamespace(config=config)] if config else [], target=SM90)

    def hint(tuned, size):
        return range_tuner._nearest_best(load_op("gemm"), SizeRange("m", 1, 16384), {"n": N, "k": K, "layout": "nt"},
                                         tuned, size)

    tuned = {1: result(swapped), 128: result(square), 1448: result(None), 16384: result(wide)}
    assert hint(tuned, 11) == [swapped]  # 11 is nearer 1 than 128 in log size
    assert hint(tuned, 430) == [square]
    assert hint(tuned, 1000) == [square]  # 1448 found nothing correct
    assert hint(tuned, 8000) == [wide]
    assert hint({}, 5) == []
    # the nearest best is not a configuration of this size (tiles are swapped up to 256 rows, 4096
    # rows are a multiple of 256): the next nearest's, not none
    assert hint({64: result(swapped), 1: result(None), 16384: result(wide)}, 4096) == [wide]
    assert hint({64: result(swapped)}, 4096) == []


def test_each_bucket_config_is_within_tolerance_at_its_tuned_sizes(tuned):
    _, settings, result, _ = tuned
    from tilesearch.database import TuningDatabase

    for bucket in result.buckets:
        for size in bucket.tuned:
            best = TuningDatabase(settings.storage, result.studies[size]).best(1)[0].latency_ms
            assert latency(size, bucket.config) <= (1 + result.tolerance) * best * (1 + 1e-9)


def test_held_out_regrets_are_the_studies_figures(tuned):
    _, _, result, certified = tuned
    assert len(certified.heldout) == 4 and not set(r.size for r in certified.heldout) & set(result.studies)
    for r in certified.heldout:
        bucket = certified.buckets[r.bucket]
        assert bucket.lo <= r.size <= bucket.hi
        assert r.dispatched_ms == pytest.approx(latency(r.size, bucket.config))  # measured at that size
        assert r.regret >= 0 and r.best_ms <= r.dispatched_ms
    s = summary(certified.heldout)
    assert s["measured"] == 4 and 0 <= s["median_regret"] <= s["max_regret"]


def heldout_marks(storage):
    import optuna

    return {s.user_attrs["problem"]: s.user_attrs[HELDOUT_ATTR]
            for s in optuna.study.get_all_study_summaries(storage, include_best_trial=False)
            if HELDOUT_ATTR in s.user_attrs}


def test_held_out_studies_are_marked_so_no_search_learns_from_them(tuned):
    _, settings, result, certified = tuned
    marks = heldout_marks(settings.storage)
    assert sorted(int(p.split(",")[0][2:]) for p in marks) == sorted(r.size for r in certified.heldout)
    assert set(marks.values()) == {certified.key}
    assert not set(result.studies) & {r.size for r in certified.heldout}


def test_a_range_tuned_again_marks_its_earlier_held_out_sizes(tuned, tmp_path):
    import sqlite3

    import optuna

    root, settings, result, certified = tuned
    with sqlite3.connect(root / "db.sqlite") as source, sqlite3.connect(tmp_path / "db.sqlite") as copy:
        source.backup(copy)  # the write-ahead log's pages too
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"

    bare = optuna.storages.RDBStorage(storage)
    for s in optuna.study.get_all_study_summaries(bare, include_best_trial=False):  # as certified before the mark
        if HELDOUT_ATTR in s.user_attrs:
            bare.set_study_user_attr(bare.get_study_id_from_name(s.study_name), HELDOUT_ATTR, "")
    assert not any(heldout_marks(storage).values())
    again = tune_range("gemm", {"m": "1..4096", "n": N, "k": K, "layout": "nt"},
                       settings=TuneSettings(strategy="random", trials=5, progress=False, storage=storage),
                       ranges=RangeSettings(sizes=4), runner=runner)
    assert again.studies == result.studies  # served from the storage
    assert set(heldout_marks(storage).values()) == {certified.key}


def test_the_range_is_kept_in_the_storage_and_shown(tuned, capsys):
    _, settings, _, certified = tuned
    found = range_tuner.find(settings.storage, "gemm", certified.key, "sm_90a")
    assert found == [certified]
    assert main(["show", "op=gemm", "m=1..4096", f"n={N}", f"k={K}", "layout=nt", f"storage={settings.storage}"]) == 0
    out = capsys.readouterr().out
    assert "buckets" in out and f"m=1..{certified.buckets[0].hi}" in out and "regret: median" in out


# --- the dispatching kernel, without a GPU ----------------------------------------------------


def dispatch(launches=None):
    return meta_dispatch(N, K, edges=(1, 129), hi=4096, launches=launches)


def test_dispatch_picks_the_bucket_by_size_and_refuses_sizes_outside():
    launches = []
    d = dispatch(launches)
    for m in (1, 128, 129, 4096):
        d._dispatch(torch.empty(m, K), torch.empty(K, N), torch.empty(m, N))
    assert launches == [(0, 1), (0, 128), (1, 129), (1, 4096)]
    with pytest.raises(BadTensorError, match="m=4097 is outside the range 1..4096"):
        d.bucket(4097)


def test_dispatch_traces_once_for_every_m_under_dynamic_compile():
    d = dispatch()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    weight = torch.empty(N, K, dtype=torch.float16, device="meta")
    model = torch.compile(lambda x: torch.relu(d(x, weight)), fullgraph=True, dynamic=True, backend=backend)
    for m in (3, 17, 200, 4000):
        out = model(torch.empty(m, K, dtype=torch.float16, device="meta"))
        assert out.shape == (m, N) and out.dtype == torch.float16
    assert len(graphs) == 1  # one graph with a symbolic M: no recompilation per size (M=1 would be specialized once)
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.ops.tilesearch.gemm.default in targets or torch.ops.tilesearch.gemm in targets


def test_symbolic_kernel_still_checks_static_dims_and_agreement():
    kernel = Kernel(symbolic_gemm_metadata(N, K), launch=None)
    a = torch.empty(5, K, dtype=torch.float16, device="meta")
    with pytest.raises(BadTensorError, match="input B has shape"):
        kernel(a, torch.empty(N, K + 1, dtype=torch.float16, device="meta"))
    with pytest.raises(BadTensorError, match="output C has shape \\(6, 1024\\).*m=5"):
        kernel(a, torch.empty(N, K, dtype=torch.float16, device="meta"),
               out=torch.empty(6, N, dtype=torch.float16, device="meta"))


# --- with nvcc: the dispatch artifact -----------------------------------------------------------


@pytest.mark.nvcc
def test_export_range_writes_one_artifact_with_run_time_m_kernels(tuned, monkeypatch):
    from tilesearch.deploy import dispatch

    root, settings, _, certified = tuned
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "tilelang-cache"))
    ahead, real = [], dispatch._compile_ahead
    monkeypatch.setattr(dispatch, "_compile_ahead", lambda result, kernels: (ahead.append(len(kernels)),
                                                                             real(result, kernels)))
    meta = export_range(certified, root / "dispatch")
    distinct = len({config_key(b.config) for b in certified.buckets})
    assert ahead == ([distinct] if distinct > 1 else [])  # compiled side by side in a pool first
    assert read(root / "dispatch") == meta
    assert [(b["lo"], b["hi"]) for b in meta["buckets"]] == [(b.lo, b.hi) for b in certified.buckets]
    assert len(meta["heldout"]) == 4 and meta["summary"]["measured"] == 4
    kernel = load(root / "dispatch", arch="sm_90a")
    assert isinstance(kernel, Dispatch) and len(kernel.kernels) == len(certified.buckets)
    for sub, bucket in zip(kernel.kernels, certified.buckets):
        assert config_key(sub.metadata.config) == config_key(bucket.config)
        assert sub.metadata.inputs[0].shape == ("m", K) and sub.metadata.sizes == {"m": ["A", 0]}
        for w in sub.metadata.workspaces:  # split-K: rows follow M, rounded to the tile
            assert w.shape[1] == f"m:{sub.metadata.config['block_m']}"
    a = torch.empty(77, K, dtype=torch.float16, device="meta")
    assert kernel(a, torch.empty(N, K, dtype=torch.float16, device="meta")).shape == (77, N)
    same = load(op="gemm", m="1..4096", n=N, k=K, layout="nt", storage=settings.storage,
                cache_dir=root / "kernels", arch="sm_90a")
    assert isinstance(same, Dispatch) and same.table["buckets"] == meta["buckets"]


@pytest.mark.gpu
@pytest.mark.nvcc
def test_gpu_dispatch_computes_every_m_and_traces_once(tuned, monkeypatch):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the test artifact is compiled for sm_90a")
    root, _, _, certified = tuned
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "tilelang-cache"))
    if not (root / "dispatch").exists():
        export_range(certified, root / "dispatch")
    kernel = load(root / "dispatch")
    gen = torch.Generator(device="cuda").manual_seed(0)
    b = torch.randn(N, K, device="cuda", generator=gen).half()
    compiled = torch.compile(lambda x: kernel(x, b), fullgraph=True, dynamic=True)
    for m in (1, 7, 64, 129, 1000, 4095, 4096):  # odd sizes leave partial tiles in every bucket
        a = torch.randn(m, K, device="cuda", generator=gen).half()
        ref = a.double() @ b.double().T
        c = kernel(a, b)
        assert ((c.double() - ref).norm() / ref.norm()).item() < 2e-3, m
        assert torch.equal(compiled(a), c)


def test_a_range_without_any_correct_configuration_is_a_typed_error(tmp_path):
    from tilesearch.range_tuner import NoBucketsError

    settings = TuneSettings(strategy="random", trials=2, progress=False, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    with pytest.raises(NoBucketsError, match="no correct configuration at any tuned size of gemm m=1..2"):
        tune_range("gemm", {"m": "1..2", "n": 64, "k": 64}, settings=settings,
                   runner=lambda problem: SyntheticRunner(lambda config: None, SM90))


@pytest.fixture(scope="module")
def cli_range(tmp_path_factory):
    """``tilesearch tune`` with a range, certified, run once for the tests of what it prints:
    (exit code, stdout, stderr). A range takes a minute here, and both tests read one."""
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    storage = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'db.sqlite'}"
    real_tune, real_certify = range_tuner.tune_range, range_tuner.certify
    out, err = StringIO(), StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch, redirect_stdout(out), redirect_stderr(err):
        monkeypatch.setattr(range_tuner, "tune_range", lambda *a, **k: real_tune(*a, runner=runner, **k))
        monkeypatch.setattr(range_tuner, "certify", lambda *a, **k: real_certify(*a, runner=runner, **k))
        code = main(["tune", "op=gemm", "m=1..512", f"n={N}", f"k={K}", "layout=nt", "strategy=random", "trials=2",
                     "sizes=3", "heldout=2", f"storage={storage}"])
    return code, out.getvalue(), err.getvalue()


def test_cli_tune_with_a_range_prints_buckets_and_regrets(cli_range):
    code, out, _ = cli_range
    assert code == 0, out
    assert "range: gemm m=1..512,n=1024,k=2048,dtype=float16,layout=nt on synthetic (sm_90a) [replayed]" in out
    assert "tuned sizes: 1, 22, 512" in out and "held-out sizes" in out and "regret: median" in out


def test_cli_range_tune_says_which_size_it_is_on(cli_range):
    code, _, err = cli_range
    assert code == 0, err
    for size in (1, 22, 512):
        assert f"range: m={size}: tuning 2 configurations" in err
        assert f"range: m={size}: best " in err
    # the other sizes' winners measured at each size are said too (minutes on a GPU)
    assert "other sizes' winners (" in err


class Counted(SyntheticRunner):
    """A synthetic runner for any problem it is prepared for; counts instances and closes."""

    made: list["Counted"] = []

    def __init__(self):
        super().__init__(lambda config: gemm_latency(self.problem, config, SM90), SM90)
        self.problem, self.closed = None, 0
        Counted.made.append(self)

    def prepare(self, problem, space):
        self.problem = problem.to_dict()
        return space

    def close(self):
        self.closed += 1


def test_a_named_runner_is_started_once_for_every_size_and_closed_at_the_end(tmp_path, monkeypatch):
    # one GPU worker and one compile pool serve the whole range; tune() leaves open the stages it
    # is given, so sizes and cross-measurements do not each pay a worker start
    Counted.made.clear()
    monkeypatch.setattr(range_tuner, "make_runner", lambda settings: Counted())
    settings = TuneSettings(strategy="random", trials=3, progress=False, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    # 1..512 (the CLI tests' range): sizes placed in a second round, refined, probed, as 1..4096's
    result = tune_range("gemm", {"m": "1..512", "n": N, "k": K, "layout": "nt"}, settings=settings,
                        ranges=RangeSettings(sizes=4))
    certify(result, settings=settings, heldout=2)
    assert len(result.studies) >= 3
    assert len(Counted.made) == 2  # one for tune_range, one for certify
    assert [r.closed for r in Counted.made] == [1, 1]
    assert len({c.problem["m"] for c in Counted.made[0].calls}) == len(result.studies)
    # the range measures the kernels it dispatches, M a run-time value, at every size; a held-out
    # size's search compiles for that size, and its dispatched kernel is the run-time one
    ranged, held = Counted.made
    assert {c.runtime for c in ranged.calls} == {("m",)}
    assert sorted(c.runtime for c in held.calls if c.runtime) == [("m",), ("m",)]  # one a held-out size
    assert any(not c.runtime for c in held.calls)


def test_a_ranges_studies_are_apart_from_its_sizes_own(tmp_path):
    # a range's figures are the run-time-M kernel's: a study of its own, which neither an export
    # of one size nor that size's own tuning takes for the kernel compiled for it
    from tilesearch.database import find_studies
    from tilesearch.op import Problem
    from tilesearch.tuner import tune

    settings = TuneSettings(strategy="random", trials=3, progress=False, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    result = tune_range("gemm", {"m": "1..4096", "n": N, "k": K, "layout": "nt"}, settings=settings,
                        ranges=RangeSettings(sizes=3, probes=0), runner=runner)
    size, name = next(iter(result.studies.items()))
    assert name.endswith("/runtime=m")
    problem = Problem("gemm", {"m": size, "n": N, "k": K, "dtype": "float16", "layout": "nt"})
    assert find_studies(settings.storage, "gemm", problem) == []
    assert find_studies(settings.storage, "gemm", problem, runtime=("m",)) == [name]
    own = tune("gemm", problem, settings=settings, runner=runner(problem))
    assert own.study != name and find_studies(settings.storage, "gemm", problem) == [own.study]
    assert own.measured_now == 3  # nothing served from the range's study


def test_a_finished_range_is_served_without_starting_a_worker(tmp_path, monkeypatch):
    settings = TuneSettings(strategy="random", trials=3, progress=False, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    params = {"m": "1..512", "n": N, "k": K, "layout": "nt"}  # its sizes, refining and probes served again
    results, real_tune = {}, range_tuner.tune

    def recording(op, problem, **kw):
        result = real_tune(op, problem, **kw)
        results.setdefault(problem.key, result)  # each size's own search, as served again below
        return result

    monkeypatch.setattr(range_tuner, "tune", recording)
    monkeypatch.setattr(range_tuner, "make_runner", lambda settings: Counted())
    first = tune_range("gemm", params, settings=settings, ranges=RangeSettings(sizes=3))

    def no_worker(settings):
        raise AssertionError("a finished range started a worker")

    # every size's study is finished: served as tune() serves it (here: the recorded results)
    monkeypatch.setattr(range_tuner, "make_runner", no_worker)
    monkeypatch.setattr(range_tuner.served, "probe", lambda: object())
    monkeypatch.setattr(range_tuner.served, "result", lambda op, problem, settings, found: results.get(problem.key))
    again = tune_range("gemm", params, settings=settings, ranges=RangeSettings(sizes=3))
    assert again.buckets == first.buckets and again.studies == first.studies


def test_a_sizes_winners_include_its_contenders_within_the_tolerance(monkeypatch):
    from types import SimpleNamespace

    ms = {"choice": 1.01, "fastest": 1.0, "a": 1.02, "b": 1.025, "c": 1.029, "d": 1.028, "slow": 1.05}
    records = [SimpleNamespace(config={"tile": name}, latency_ms=ms[name], status="ok") for name in ms]  # ranked: choice first

    class Db:
        def __init__(self, storage, study):
            pass

        def best(self, n):
            return records

    monkeypatch.setattr(range_tuner, "TuningDatabase", Db)
    winners = range_tuner._winners({64: SimpleNamespace(study="s")}, TuneSettings(), 0.03)
    # the choice, the fastest, and the CONTENDERS (3) fastest of the rest within 3%
    assert {c["tile"] for c in winners.values()} == {"choice", "fastest", "a", "b", "d"}
    assert len(range_tuner._winners({64: SimpleNamespace(study="s")}, TuneSettings(), 0.0)) == 2


def test_probes_and_contenders_stay_at_the_resolved_loss_while_buckets_follow_the_tolerance():
    from tilesearch.buckets import RESOLVED

    assert RangeSettings().tolerance < RESOLVED  # buckets finer than one search figure resolves
    assert range_tuner._margin(RangeSettings()) == RESOLVED
    assert range_tuner._margin(RangeSettings(tolerance=0.05)) == 0.05


def test_each_tuned_size_gets_its_refining_trials_once(tuned, tmp_path):
    from tilesearch.database import TuningDatabase

    _, settings, result, _ = tuned
    searched = [s for s in result.studies if s not in result.probes]
    counts = {}
    for size in searched:
        db = TuningDatabase(settings.storage, result.studies[size])
        assert db.study.user_attrs[range_tuner.REFINED_ATTR] == 3
        counts[size] = db.planned()
        assert counts[size] >= settings.trials + 3
    # tuned again (as a resumed or repeated run is): nothing more is added
    tune_range("gemm", {"m": "1..4096", "n": N, "k": K, "layout": "nt"}, settings=settings,
               ranges=RangeSettings(sizes=4), runner=runner)
    assert {s: TuningDatabase(settings.storage, result.studies[s]).planned() for s in searched} == counts


def test_the_command_line_takes_every_range_setting():
    from tilesearch.range_cli import RANGE_KEYS

    assert set(RANGE_KEYS) == set(RangeSettings.keys())


def test_a_range_run_again_tunes_the_sizes_it_placed_before_deciding_anything(tmp_path, monkeypatch):
    # placed again from later figures, a resumed range on the H100 tuned other sizes, deciding
    # (cross-measuring, compiling) between each two
    settings = TuneSettings(strategy="random", trials=3, progress=False, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    params = {"m": "1..4096", "n": N, "k": K, "layout": "nt"}
    first = tune_range("gemm", params, settings=settings, ranges=RangeSettings(sizes=4, probes=0), runner=runner)
    name = range_tuner.record_name("gemm", first.key, first.arch)
    placed = range_tuner._recorded(settings.storage, name)
    assert sorted(placed) == sorted(first.studies) and placed[:3] == [1, 64, 4096]

    range_tuner._note(settings.storage, name, [1, 64, 4096, 700])  # as if an earlier run had placed 700
    decided_on = []
    cross_measure = range_tuner._cross_measure
    monkeypatch.setattr(range_tuner, "_cross_measure",
                        lambda op, sr, rest, tuned, *a: (decided_on.append(sorted(tuned)), cross_measure(op, sr, rest, tuned, *a))[1])
    again = tune_range("gemm", params, settings=settings, ranges=RangeSettings(sizes=4, probes=0), runner=runner)
    assert decided_on[0] == [1, 64, 700, 4096] and sorted(again.studies) == [1, 64, 700, 4096]
    assert range_tuner._recorded(settings.storage, name) == [1, 64, 4096, 700]


def test_a_range_run_again_re_times_no_size_that_an_earlier_run_re_timed(tmp_path, monkeypatch):
    # each size is re-timed once, when placed; the winners cross-measured there afterwards are the
    # range's own figures. Run again (resumed on a fresh H100 host), the range re-timed all seven
    # sizes for them, compiling each one's best anew: three minutes before its first probe
    from tilesearch import tuner
    from tilesearch.database import TuningDatabase

    settings = TuneSettings(strategy="random", trials=3, progress=False, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    params = {"m": "1..4096", "n": N, "k": K, "layout": "nt"}
    retimed, real = [], tuner.final_retime
    monkeypatch.setattr(tuner, "final_retime", lambda runner, configs, **kw: (retimed.append(kw["problem"]["m"]),
                                                                               real(runner, configs, **kw))[1])
    first = tune_range("gemm", params, settings=settings, ranges=RangeSettings(sizes=4, probes=0), runner=runner)
    searched = sorted(first.studies)
    assert sorted(retimed) == searched  # once each, when placed
    stale = [s for s in searched if TuningDatabase(settings.storage, first.studies[s]).final() is None]
    assert stale  # the cross-measured winners came after those re-times
    retimed.clear()
    again = tune_range("gemm", params, settings=settings, ranges=RangeSettings(sizes=4, probes=0), runner=runner)
    assert retimed == [] and again.buckets == first.buckets
    more = TuneSettings(strategy="random", trials=16, progress=False, storage=settings.storage)  # past the refining and the winners
    tune_range("gemm", params, settings=more, ranges=RangeSettings(sizes=4, probes=0), runner=runner)
    assert retimed  # a size whose search went on is re-timed again


def test_the_ops_hints_come_after_the_ranges_own_and_take_no_probes_trials(tmp_path, monkeypatch):
    # with hints=carver a size's first trial is the range's hint (the nearest tuned size's best),
    # then the op's; a probe times the winners and searches without the op's hints
    from itertools import islice

    from tilesearch import registry
    from tilesearch.database import TuningDatabase
    from tilesearch.op import Problem

    gemm = registry.load("gemm")
    spaces = [gemm.space(Problem("gemm", {"m": m, "n": N, "k": K, "dtype": "float16", "layout": "nt"}), SM90)
              for m in (1, 22, 512)]  # the sizes it tunes first
    valid = [c for c in islice(spaces[2].enumerate(), 3000)
             if all(s.why_invalid(c) is None for s in spaces) and all(latency(m, c) for m in (1, 22, 512))]
    worst = max(valid, key=lambda c: latency(22, c))  # never a winner: its hint shows where it went
    monkeypatch.setattr(type(gemm), "hints", lambda self, problem, space, target, *, kind, n: [dict(worst)])
    calls, real_tune = [], range_tuner.tune

    def recording(op, problem, settings=None, **kw):
        calls.append((problem.to_dict()["m"], settings.hints))
        return real_tune(op, problem, settings=settings, **kw)

    monkeypatch.setattr(range_tuner, "tune", recording)
    ranges_hints, nearest_best = {}, range_tuner._nearest_best
    monkeypatch.setattr(range_tuner, "_nearest_best", lambda *a: ranges_hints.setdefault(a[-1], nearest_best(*a)))
    settings = TuneSettings(strategy="random", trials=3, progress=False, hints="carver",
                            storage=f"sqlite:///{tmp_path / 'db.sqlite'}")
    result = tune_range("gemm", {"m": "1..512", "n": N, "k": K, "layout": "nt"}, settings=settings,
                        ranges=RangeSettings(sizes=3, refine=0), runner=runner)
    assert calls and {hints for _, hints in calls} == {""}  # tune adds no hints ahead of the range's
    first, *later = sorted(result.studies)
    hinted = 0
    for size in later:
        if size in result.probes:
            continue
        trials = [r for r in TuningDatabase(settings.storage, result.studies[size]).records() if r.duplicate_of is None]
        # the range's hint came first, where a tuned size's best is valid here (none is at 512 rows
        # when the smaller sizes' bests are swapped tiles), then the op's
        own = ranges_hints[size]
        assert [config_key(r.config) for r in trials[:len(own)]] == [config_key(c) for c in own]
        assert config_key(worst) == config_key(trials[len(own)].config)
        hinted += bool(own)
    assert hinted  # some size had the range's hint
    assert result.probes
    for size in result.probes:
        configs = {config_key(r.config) for r in TuningDatabase(settings.storage, result.studies[size]).records()}
        assert config_key(worst) not in configs
