"""Records a replay dataset: configurations of an op's knob space, measured on this GPU.

The recording mode of the shared experiment runner (:mod:`tilesearch.experiment.record`
documents the method: a seeded sweep of every valid configuration, or a uniform sample and the
neighbours of its best; resumable from ``--storage``; ``--dry-run`` records made-up latencies on
a CPU, its files marked SYNTHETIC). Writes ``$OUT/<op>_<problem>_<gpu>.jsonl.gz`` and prints a
table last, one line per problem.

usage (on the GPU host):
    # every valid configuration of the 7-knob GEMM sub-space (the committed datasets)
    python experiments/record_dataset.py --shapes 8192x8192x8192:float16 --out $OUT
    # the full GEMM space: 1,600 configurations drawn uniformly, then every configuration one
    # knob away from the 8 best of them (issue 19's datasets)
    python experiments/record_dataset.py --space full --sample 1600 --neighbours 8 \
        --problems "m=1024 n=1024 k=1024; m=4096 n=14336 k=4096 layout=nt" --out $OUT
    # einsum-sum: every valid configuration of its space
    python experiments/record_dataset.py --op einsum_sum --space full \
        --problems "t=8192 k=8192 h=16 d=128 dtype=bfloat16" --out $OUT
"""

import sys

from tilesearch.experiment.record import main  # --space sub: record.SUBSPACE, the committed datasets' knobs

if __name__ == "__main__":
    sys.exit(main())
