"""tilesearch against TileLang's autotuner, Triton's autotune and cuBLAS on one GEMM grid (GPU).

Searches: tilesearch measuring every configuration of the grid (``grid``) and a search of
``trials`` of them (``xgb``). Then one fresh worker re-times the top configurations of both
beside the peers, all checked against float64 and interleaved in the same rounds on the same
inputs with their 95% intervals: ``torch`` (``torch.matmul``, cuBLAS), ``triton``
(``@triton.autotune`` over Triton's standard matmul list, tuned in that worker first) and
``tilelang`` (``tilelang.autotuner.autotune`` over the same grid, tuned in that worker first;
its tuning time is the entry's ``make_s``). Whether the searched kernel is within 3% of the
grid's best is read in that re-time.

Grids (``grid=``): ``small`` (32 valid configurations) or ``large`` (96: three times the work).
The scripts before the shared runner also measured each tool's compile throughput in its own
process with an empty cache; that is no longer measured here (see RESULTS.md for those runs).

usage: python experiments/peers_gemm.py out=$OUT [m=8192 n=8192 k=8192] [grid=small|large] [trials=8]
       python experiments/peers_gemm.py replot=FILE   # the table and plot of a recorded run (old ones too)
"""

import sys
from dataclasses import replace

from tilesearch.experiment import EVERY, PEERS, Experiment, main

GRIDS = {
    "small": dict(
        block_m=(128, 256), block_n=(128, 256), block_k=(32, 64), num_stages=(3, 4),
        threads=(128, 256), panel_size=(0, 8), warp_policy=("square",),
    ),
    "large": dict(
        block_m=(128, 256), block_n=(128, 256), block_k=(32, 64), num_stages=(2, 3, 4),
        threads=(128, 256), panel_size=(0, 8), warp_policy=("square", "full_row"),
    ),
}


def with_grid(experiment: Experiment, grid: str) -> Experiment:
    """The experiment on grid ``grid``: every peer and search sweeps it."""
    knobs = GRIDS[grid]
    peers = tuple(replace(PEERS["tilelang"], options={"knobs": knobs}) if p in ("tilelang", PEERS["tilelang"])
                  or getattr(p, "name", "") == "tilelang autotune" else p for p in experiment.peers)
    return replace(experiment, knobs=knobs, peers=peers, title=f"GEMM, {grid} grid, tilesearch and peers re-timed")


def search_trials(experiment: Experiment, value: str) -> Experiment:
    """``trials=`` counts the search's trials; the grid is always measured whole."""
    return replace(experiment, trials={"grid": EVERY, "xgb": int(value)})


PEERS_GEMM = with_grid(Experiment(
    name="peers_gemm", op="gemm", problems=({"m": 8192, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn"},),
    strategies=("grid", "xgb"), trials={"grid": EVERY, "xgb": 8}, top=2, peers=("torch", "triton", PEERS["tilelang"]),
), "small")

if __name__ == "__main__":
    sys.exit(main(PEERS_GEMM, options={"grid": with_grid, "trials": search_trials}))
