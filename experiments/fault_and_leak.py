"""Memory across hundreds of GEMM kernels, and fault isolation on real bad kernels, in one GPU call.

Phases (all by default):

- ``leak``: tunes GEMM 2048^3 float16 over ``kernels`` random configurations, each compiled from an
  empty TileLang cache and measured, with the runner's worker never recycled, so that any growth
  shows; memory inside and outside the worker is recorded every 10th kernel.
- ``leak-default``: the same configurations (now cached: measuring only) with the runner as
  tune() makes it (its worker recycled every 200 kernels).
- ``faults``: ``tilesearch.testing.faulty:FaultyOp`` on the GPU, every fault x 2 block sizes: each
  must end with its status and the best must be a correct kernel.

Writes ``leak_raw.csv``, ``leak_default.csv``, ``faults.json``, ``summary.json`` and the studies
under ``out``; prints a table last. About 4-5 minutes on an H100 with 16 cores. The work is in
:mod:`tilesearch.experiment.fault_and_leak`.

usage: python experiments/fault_and_leak.py out=$OUT [phases=leak,leak-default,faults] [kernels=320]
"""

import sys

from tilesearch.experiment.checks import Check, main

FAULT_AND_LEAK = Check(name="fault_and_leak", work="tilesearch.experiment.fault_and_leak:check",
                       options={"phases": "leak,leak-default,faults", "kernels": 320, "run_timeout": 15.0})

if __name__ == "__main__":
    sys.exit(main(FAULT_AND_LEAK))
