"""The GEMM suite of issue 7 (GPU): tilesearch's tuned GEMM against ``torch.matmul``, per shape,
with an ablation of each knob beyond the tile shape.

For every shape the full GEMM space is tuned (``xgb``, which also learns from the shapes tuned
before it in the same storage; ``trials`` per shape; no search starts after ``budget_s``). Then,
per shape, one fresh worker re-times the top 3 configurations, the best with each knob group
reset to its value before that knob existed (``split_k``; ``persistent``; ``epilogue``; ``tma``
with ``warp_specialize``; ``all_new``: all of them, i.e. the template as it was before) and
``torch.matmul``, each checked against float64 and all interleaved in the same rounds until each
ratio's 95% interval is within +-1%. The suite's figures are that re-time's ratios; an
ablation's gain is the reset configuration's latency over the best's in the same rounds (above 1
the knob helps; ``same`` where the best has the old values already; ``invalid`` where the space
refuses the reset, with its reason, e.g. "same kernel as tma=False").

Writes ``gemm_suite.{json,txt,png,log}`` and the studies (``gemm_suite.db``) under ``out``; the
table is printed last, then the verdict (geometric mean of the ratios). Earlier runs made their
re-time a second command (``--retime``); it is now part of every run.

usage: python experiments/gemm_suite.py out=$OUT [shapes=sq4096,longk,...] [trials=24] [budget_s=420]
"""

import math
import sys

from search_spaces.gemm import DEFAULTS
from tilesearch.experiment import Experiment, main

SHAPES = {name: dict(zip(("m", "n", "k", "dtype", "layout"), shape)) for name, shape in {
    "sq4096": (4096, 4096, 4096, "float16", "nn"),
    "sq8192": (8192, 8192, 8192, "float16", "nn"),
    "sq12288": (12288, 12288, 12288, "float16", "nn"),
    "sq8192_bf16": (8192, 8192, 8192, "bfloat16", "nn"),
    "sq4096_nt": (4096, 4096, 4096, "float16", "nt"),
    "longk": (1024, 1024, 14336, "float16", "nn"),
    "wide": (4096, 2048, 1024, "float16", "nn"),
    "skinny1": (1, 8192, 8192, "float16", "nn"),
    "skinny16": (16, 8192, 8192, "float16", "nn"),
    "skinny64": (64, 8192, 8192, "bfloat16", "nn"),
    "skinny128": (128, 8192, 8192, "float16", "nn"),
    "odd1000": (1000, 3000, 500, "float16", "nn"),
    "odd4097": (4097, 4095, 129, "bfloat16", "nn"),
}.items()}
GROUPS = {
    "split_k": {"split_k": 1},
    "persistent": {"persistent": False},
    "epilogue": {"epilogue": "direct"},
    "tma_ws": {"tma": True, "warp_specialize": "on"},
    "all_new": dict(DEFAULTS),
}

SUITE = Experiment(
    name="gemm_suite", op="gemm", problems=tuple(SHAPES.values()), strategies=("xgb",), trials=24, top=3,
    ablations=GROUPS, budget_s=420.0, settings={"run_timeout": 20.0},
    title="GEMM suite: tuned against torch.matmul, re-timed together, with knob ablations",
)


def verdict(result: dict) -> str:
    """Geometric mean of the chosen configurations' ratios to torch.matmul, shapes below 0.9."""
    ratios = []
    for prob in result["problems"]:
        chosen = next((e for e in (prob.get("retime") or {}).get("entries", []) if e["kind"] == "tilesearch"), None)
        if chosen and chosen["result"].get("speedup"):
            ratios.append(chosen["result"]["speedup"])
    if not ratios:
        return "no shape has a re-timed ratio to torch.matmul"
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    return (f"geometric mean tuned/torch over {len(ratios)} shapes: {geo:.3f}; "
            f"shapes below 0.9: {sum(x < 0.9 for x in ratios)}; min {min(ratios):.3f}")


if __name__ == "__main__":
    sys.exit(main(SUITE, catalog=SHAPES, pick="shapes", verdict=verdict))
