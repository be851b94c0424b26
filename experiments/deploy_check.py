"""Every tuned kernel deployable, for every shape (issue 14), checked on one GPU.

Parts (``parts=a,b,c``; each can run in its own call, all share ``work``):

a. composite kernels: the two split-K GEMMs (m=16 n=8192 k=8192 float16 nn; m=16 n=4096 k=14336
   bfloat16 nt) and a ``reduce_first`` einsum-sum, tuned with the split (or the algorithm)
   pinned so the exported best is a composite program; each artifact loaded and checked bitwise
   against the tuned program in eager mode, under ``torch.compile(fullgraph=True)`` and from a
   CUDA graph.
b. a range: tunes ``m=1..16384`` for each of ``pairs`` (n x k), exports its dispatch artifact,
   and certifies it on ``heldout`` sizes that were not tuned (regret = dispatched / best - 1,
   timed beside ``torch.matmul``).
c. the MLP example (``examples/llama_mlp.py``): tunes its two GEMM ranges and runs the block
   against PyTorch eager and compile.

Databases and artifacts go under ``work``; a log and ``deploy_check.json`` under ``out``; a short
table last. On an H100 (2026-11-24): part a 199 s, part c 299 s; part b with ``sizes=4`` about
1060 s before ``cc19ce4`` (since then one GPU worker serves a whole range), so it may pass a
10-minute limit: run it again with the same ``work`` and it resumes from the finished sizes'
studies (a range prints one line per size). The work is in
:mod:`tilesearch.experiment.deploy_check`.

    python experiments/deploy_check.py parts=a,b,c out=$OUT
"""

import sys

from tilesearch.experiment.checks import Check, main

DEPLOY = Check(name="deploy_check", work="tilesearch.experiment.deploy_check:check", options={
    "parts": "a,b,c", "work": "/tmp/tilesearch-deploy", "pairs": "4096x4096",
    "trials": 8,  # configurations per tuned size (parts b, c)
    "trials_a": 16,  # configurations per composite problem
    "sizes": 4,  # sizes tuned per range (part b)
    "mlp_sizes": 3,  # sizes tuned per range (part c)
    "heldout": 8,
    "refine": 3,  # more configurations each tuned size's search gets once the sizes are settled (part b)
})

if __name__ == "__main__":
    sys.exit(main(DEPLOY))
