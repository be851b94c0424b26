"""One study tuned by 2 workers, one per GPU, against 1 worker on the same trials (2-GPU machine).

Both runs search the same GEMM sub-space exhaustively (grid over its valid configurations), each
compiling from an empty TileLang cache (``cache=cold``; ``warm`` compiles every configuration
beforehand, so both only measure) with the same total number of compile processes, so that they
measure the same configurations and must find the same best. Reported: wall time of each,
trials per minute, what each worker did, configurations measured twice (must be 0), and the two
bests re-timed interleaved in one process on GPU 0 beside torch.matmul. Writes
``multi_gpu.{db,json}`` under ``out``; prints a table last. About 3 minutes on 2 H200s (an
estimate). The work is in :mod:`tilesearch.experiment.multi_gpu`.

usage: python experiments/multi_gpu.py out=$OUT [size=8192] [order=two-first|one-first] [cache=cold|warm]
       python experiments/multi_gpu.py out=/tmp/x size=4096 \\
           runner=replay:experiments/data/gemm_4096x4096x4096_float16_nn_h100_80gb_hbm3.jsonl.gz
           (a dry run of the machinery without a GPU: no compiling, no re-timing, no real timings)
"""

import sys

from tilesearch.experiment.checks import Check, main

MULTI_GPU = Check(name="multi_gpu", work="tilesearch.experiment.multi_gpu:compare",
                  options={"size": 8192, "order": "two-first", "runner": "local", "cache": "cold"})

if __name__ == "__main__":
    sys.exit(main(MULTI_GPU))
