"""Where one configuration's compile time goes (the fast-tuning issue): lowering in Python against
nvcc and the host compiler, per sampled GEMM configuration, from an empty TileLang cache, compiled
alone and in batches (``batch``: the sizes to compare, the first the reference; batches are nvcc's,
so with NVRTC, the default where it loads, ``batch=1`` or ``TILESEARCH_COMPILER=nvcc``). Needs nvcc,
no GPU; with ``workers=1`` the per-configuration seconds are those of one core.

    python experiments/compile_time.py out=$OUT [configs=16] [workers=1] [batch=1,8] [m=8192 n=8192 k=8192]

The work is in :mod:`tilesearch.experiment.compile_time`.
"""

import sys

from tilesearch.experiment.checks import Check, main

COMPILE_TIME = Check(name="compile_time", work="tilesearch.experiment.compile_time:measure", options={
    "configs": 16, "workers": 1, "batch": "1,8", "seed": 0, "arch": "sm_90a",
    "m": 8192, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn",
})

if __name__ == "__main__":
    sys.exit(main(COMPILE_TIME))
