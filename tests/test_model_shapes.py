"""The model-shape suite's catalog and selection keys (experiments/model_shapes.py), on the CPU."""

import runpy
from pathlib import Path

from tilesearch.experiment.cli import configure

SCRIPT = Path(__file__).resolve().parents[1] / "experiments/model_shapes.py"


def load():
    return runpy.run_path(str(SCRIPT))  # fresh: the selection keys remember what was chosen


def test_projections_follow_the_published_configs():
    suite = load()
    assert suite["projections"](*suite["MODELS"]["llama3_8b"]) == {
        "qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
    assert suite["projections"](*suite["MODELS"]["llama3_70b"])["qkv"] == (10240, 8192)
    assert suite["projections"](*suite["MODELS"]["qwen2_5_7b"])["qkv"] == (4608, 3584)
    assert all(p["layout"] == "nt" for p in suite["CATALOG"].values())
    assert {p["m"] for p in suite["CATALOG"].values()} >= {1, 16, 128, 512, 2048, 8192}


def test_selection_keys_narrow_the_whole_product_and_the_default_is_a_subset():
    suite = load()
    chosen = configure(suite["MODEL_SHAPES"], ["models=llama3_8b,qwen2_5_7b", "ms=16", "dtypes=bfloat16"],
                       suite["CATALOG"], "shapes", suite["OPTIONS"])
    assert len(chosen.problems) == 8 and {p["m"] for p in chosen.problems} == {16}
    assert {(p["n"], p["k"]) for p in chosen.problems} >= {(6144, 4096), (4608, 3584)}
    default = load()["MODEL_SHAPES"]
    assert 0 < len(default.problems) <= 8 and set(default.peers) == {"torch", "triton"} and default.trials <= 64
