import gzip
import json

import pytest

from tilesearch import dataset, registry
from tilesearch.experiment import record as record_dataset
from tilesearch.target import Target
from tilesearch.testing.synthetic import SyntheticRunner


def _meta(**over):
    base = dict(op="gemm", problem={"m": 64, "n": 64, "k": 64, "dtype": "float16", "layout": "nn"},
                problem_key="m=64,n=64,k=64,dtype=float16,layout=nn", target=Target.from_arch("sm_90a").to_dict(),
                knobs={"block_m": [64, 128]}, valid_configs=2, versions={"tilelang": "0.1.15"},
                date="2025-01-01T00:00:00Z", commit="abc")
    return dataset.header(**{**base, **over})


def test_round_trip_gzip_and_plain(tmp_path):
    rows = [
        dataset.Row({"block_m": 128}, "ok", latency_ms=2.0, tflops=1.0, compile_s=3.0, measure_s=0.5),
        dataset.Row({"block_m": 64}, "compile_error", error="Traceback (most recent call last):\n  File x\nError: " + "y" * 999),
    ]
    for name in ("d.jsonl.gz", "d.jsonl"):
        written = dataset.write(tmp_path / name, _meta(), rows)
        loaded = dataset.load(tmp_path / name)
        assert loaded.meta == written.meta and loaded.meta["complete"] and loaded.meta["rows"] == 2
        assert loaded.get({"block_m": 128}).latency_ms == 2.0
        assert loaded.get({"block_m": 64}).error.startswith("Error: y") and len(loaded.get({"block_m": 64}).error) == 300
        assert loaded.best().config == {"block_m": 128}
        assert loaded.get({"block_m": 256}) is None
    with gzip.open(tmp_path / "d.jsonl.gz", "rt") as f:
        assert json.loads(f.readline())["format"] == "tilesearch-sweep"


def test_rejects_other_files_and_duplicates(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"type": "row"}\n')
    with pytest.raises(dataset.DatasetError, match="not a tilesearch-sweep"):
        dataset.load(tmp_path / "x.jsonl")
    with pytest.raises(dataset.DatasetError, match="twice"):
        dataset.write(tmp_path / "y.jsonl", _meta(), [dataset.Row({"block_m": 64}, "ok")] * 2)


def test_narrow_keeps_constraints():
    op = registry.load("gemm")
    space = op.space(op.problem(m=8192, n=8192, k=8192), Target.from_arch("sm_90a"))
    sub = dataset.sweep(space, record_dataset.SUBSPACE)
    assert sub.size == 648 and sub.count_valid() == 504
    assert not sub.is_valid({"block_m": 256, "block_n": 256, "block_k": 32, "num_stages": 2, "threads": 256,
                             "panel_size": 0, "warp_policy": "square"})
    with pytest.raises(dataset.DatasetError, match="not in the space"):
        dataset.narrow(space, {"block_m": [48]})
    kinds = {k.name: type(k).__name__ for k in sub.knobs}
    assert kinds == {"block_m": "PowerOfTwo", "block_n": "PowerOfTwo", "block_k": "PowerOfTwo", "num_stages": "IntRange",
                     "threads": "Categorical", "panel_size": "Categorical", "warp_policy": "Categorical"}
    assert type(dataset.narrow(space, {"block_m": [64, 256]})["block_m"]).__name__ == "Categorical"
    assert dataset.narrow(space, {"num_stages": [1, 3, 5]})["num_stages"].values() == (1, 3, 5)


def test_recorder_writes_a_dataset_of_the_study(tmp_path, monkeypatch):
    # the synthetic runner stands in for the GPU: this checks the plumbing, not any figure
    monkeypatch.setattr(record_dataset, "LocalRunner", lambda **kw: SyntheticRunner())
    monkeypatch.setattr(record_dataset, "SUBSPACE", {**record_dataset.SUBSPACE, "block_m": (128,), "block_n": (128,),
                                                     "num_stages": (3,), "warp_policy": ("square",)})
    storage = f"sqlite:///{tmp_path / 'rec.sqlite'}"
    out = tmp_path / "out"
    assert record_dataset.main(["--shapes", "256x256x512:bfloat16", "--out", str(out), "--storage", storage,
                                "--quiet"]) == 0
    (path,) = out.glob("*.jsonl.gz")
    assert path.name == "gemm_256x256x512_bfloat16_nn_synthetic.jsonl.gz"
    data = dataset.load(path)
    assert data.meta["complete"] and len(data) == data.meta["valid_configs"] == 8
    assert data.meta["problem"]["dtype"] == "bfloat16" and data.meta["knobs"]["block_m"] == [128]
    assert all(r.ok for r in data.rows)
    assert (out / "rec.sqlite").exists()
