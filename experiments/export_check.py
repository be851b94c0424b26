"""Tune -> export -> load in a fresh process -> use from PyTorch: does the deployed kernel hold up?

One run, on one GPU (< 8 minutes on an H100):

1. tunes a small GEMM with a few trials (or takes ``storage`` with a study already there);
2. exports its best correct trial to ``out/artifact``;
3. in a FRESH process: times ``import tilesearch`` and ``tilesearch.load``, records whether
   anything compiled; checks the output bitwise against the kernel that tuning measured and
   against float64; ``out=``, the current stream, ``torch.compile(fullgraph=True)``, CUDA-graph
   replay, refusals of a wrong architecture, a corrupted artifact and bad tensors; its time beside
   TileLang's and ``torch.matmul``, and the per-launch overhead of each way of calling it;
4. runs ``examples/gemm_in_module.py`` (unless ``skip_example=true``).

Logs and JSON under ``out``; a short table last. The work is in
:mod:`tilesearch.experiment.export_check`.

    python experiments/export_check.py out=$OUT
"""

import sys

from tilesearch.experiment.checks import Check, main

EXPORT = Check(name="export_check", work="tilesearch.experiment.export_check:parent", options={
    "storage": None,  # use the studies there instead of tuning
    "trials": 8, "m": 256, "n": 256, "k": 256, "dtype": "float16", "layout": "nn",
    "calls": 200,  # back-to-back calls per timed round
    "rounds": 15, "child_timeout": 360.0, "skip_example": False,
})

if __name__ == "__main__":
    sys.exit(main(EXPORT))
