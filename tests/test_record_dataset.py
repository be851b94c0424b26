"""experiments/record_dataset.py, dry-run on the CPU (made-up latencies, no compilation)."""


import pytest

from tilesearch import dataset, registry
from tilesearch.experiment import record as rd
from tilesearch.space import config_key
from tilesearch.target import Target


def _record(tmp_path, *extra):
    out = tmp_path / "out"
    argv = ["--dry-run", "--quiet", "--out", str(out), "--storage", f"sqlite:///{tmp_path / 'r.db'}", *extra]
    assert rd.main(argv) == 0
    (path,) = out.glob("*.jsonl.gz")
    return dataset.load(path)


def test_sample_plus_neighbours_of_the_best(tmp_path, capsys):
    data = _record(tmp_path, "--shapes", "512x512x512", "--sample", "10", "--neighbours", "1", "--seed", "3")
    sample = data.meta["sample"]
    assert data.meta["version"] == 2 and data.sampled and "SYNTHETIC" in data.meta["notes"]
    assert sample["method"] == "uniform+neighbours" and sample["uniform"] == 10 and sample["seed"] == 3
    assert data.meta["complete"] and len(data) == sample["planned"] > 10
    space = dataset.sweep(registry.load("gemm").space(registry.load("gemm").problem(m=512, n=512, k=512),
                                                      Target.from_arch("sm_90a")), rd.SUBSPACE)
    valid = list(space.enumerate())
    drawn = rd.plan_sample(valid, 10, 3)
    keys = {config_key(r.config) for r in data.rows}
    assert {config_key(c) for c in drawn} <= keys
    best = min((r for r in data.rows if r.ok and config_key(r.config) in
                {config_key(c) for c in drawn}), key=lambda r: r.latency_ms)
    assert {config_key(c) for c in space.neighbours(best.config)} <= keys
    assert len(keys) == 10 + len({config_key(c) for c in space.neighbours(best.config)} -
                                 {config_key(c) for c in drawn})
    # a search on a sample can only ask for its rows
    assert data.restrict(space).count_valid() == len(data)
    assert "block_m" in capsys.readouterr().out
    # the same command again measures nothing new and writes the same rows
    again = _record(tmp_path, "--shapes", "512x512x512", "--sample", "10", "--neighbours", "1", "--seed", "3")
    assert [r.config for r in again.rows] == [r.config for r in data.rows]


def test_full_sweep_of_a_small_space_is_complete_and_has_no_sample(tmp_path):
    op = registry.load("einsum_sum")
    problem = {"t": 64, "k": 64, "h": 2, "d": 32}
    space = op.space(op.problem(**problem), Target.from_arch("sm_90a"))
    if space.count_valid() > 60:
        pytest.skip("einsum_sum's space at this size is too large for a quick dry run")
    data = _record(tmp_path, "--space", "full", "--problems", "einsum_sum: " + " ".join(f"{k}={v}" for k, v in problem.items()))
    assert data.meta["sample"] is None and data.meta["complete"] and not data.sampled


def test_bad_problem_text_is_refused():
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        rd.parse_problems("m=1 n")
    assert rd.parse_problems("m=1024 n=8 k=4 layout=nt; einsum_sum: t=2 k=3") == [
        ("gemm", {"m": 1024, "n": 8, "k": 4, "layout": "nt"}), ("einsum_sum", {"t": 2, "k": 3})]


def test_version_1_files_still_read_and_unknown_versions_are_refused(tmp_path):
    meta = dataset.header(op="gemm", problem={"m": 1}, problem_key="m=1", target={"arch": "sm_90a"},
                          knobs={"block_m": [64]}, valid_configs=1, versions={}, date="d", commit="c")
    rows = [dataset.Row({"block_m": 64}, "ok", latency_ms=1.0)]
    old = {k: v for k, v in meta.items() if k != "sample"} | {"version": 1}
    assert not dataset.write(tmp_path / "v1.jsonl", old, rows).sampled
    assert not dataset.load(tmp_path / "v1.jsonl").sampled
    dataset.write(tmp_path / "v9.jsonl", {**meta, "version": 9}, rows)
    with pytest.raises(dataset.DatasetError, match="version 9"):
        dataset.load(tmp_path / "v9.jsonl")


def test_write_only_writes_what_the_storage_holds_and_changes_nothing(tmp_path, capsys):
    recorded = _record(tmp_path, "--shapes", "512x512x512", "--sample", "6", "--neighbours", "1")
    db_file = tmp_path / "r.db"
    assert not (tmp_path / "r.db-wal").exists()  # recording closed its connections: the file is whole
    before = db_file.read_bytes()
    out = tmp_path / "again"
    args = ["--write-only", "--quiet", "--out", str(out), "--storage", f"sqlite:///{db_file}", "--shapes", "512x512x512"]
    assert rd.main([*args, "--sample", "6", "--neighbours", "1"]) == 0
    (path,) = out.glob("*.jsonl.gz")  # the dataset alone: no copy of the storage
    written = dataset.load(path)
    assert [r.config for r in written.rows] == [r.config for r in recorded.rows] and written.meta["complete"]
    assert "--write-only" in written.meta["notes"] and db_file.read_bytes() == before
    assert rd.main([*args, "--sample", "7"]) == 2  # another sample was never recorded
    assert "--write-only: no study" in capsys.readouterr().err
    assert db_file.read_bytes() == before
