"""Tune the grouped GEMM of real MoE layers on a GPU and re-time the best beside PyTorch.

For each layer: the cost-model strategy (``xgb``, 40 trials, tokens routed ``skewed``), then the
shared experiment runner re-times the top configurations in one fresh worker, checked against
float64 and interleaved with ``torch._grouped_mm`` (where this torch has it) and a loop of
``torch.matmul`` over the experts, on the same inputs, each with its 95% interval. Writes
``moe.json``, ``moe.txt``, ``moe.png`` and ``moe.log`` (and the studies, ``moe.db``) under ``out``;
prints the table last.

Layers (``layers=``, comma-separated; default ``mixtral_up,qwen_moe``):
- ``mixtral_up``: Mixtral-8x7B's expert up-projection: 8 experts, 4096 tokens routed top-2
  (8192 rows), hidden 4096 -> ffn 14336.
- ``mixtral_down``: its down-projection, ffn 14336 -> hidden 4096.
- ``qwen_moe``: a many-small-experts layer like Qwen1.5-MoE-A2.7B's: 60 experts, 4096 tokens
  routed top-4 (16384 rows), hidden 2048 -> 1408.

usage: python plugins/grouped_gemm/tune_moe.py [out=DIR] [trials=40] [layers=mixtral_up,qwen_moe] [dtype=float16]
"""

import sys

from tilesearch.experiment import Experiment, Peer, main

LAYERS = {
    "mixtral_up": dict(experts=8, tokens=8192, n=14336, k=4096, dtype="bfloat16", routing="skewed"),
    "mixtral_down": dict(experts=8, tokens=8192, n=4096, k=14336, dtype="bfloat16", routing="skewed"),
    "qwen_moe": dict(experts=60, tokens=16384, n=1408, k=2048, dtype="bfloat16", routing="skewed"),
}
WAYS = "tilesearch_grouped_gemm.op"

MOE = Experiment(
    name="moe", op="grouped_gemm", problems=(LAYERS["mixtral_up"], LAYERS["qwen_moe"]), strategies=("xgb",),
    trials=40, top=3, out="moe-out", title="grouped GEMM of MoE layers against PyTorch",
    peers=(Peer("torch._grouped_mm", "tilesearch.experiment.peers:pytorch_way", {"fn": f"{WAYS}:grouped_mm_baseline"}),
           Peer("matmul loop", "tilesearch.experiment.peers:pytorch_way", {"fn": f"{WAYS}:matmul_loop_baseline"})),
)

if __name__ == "__main__":
    sys.exit(main(MOE, catalog=LAYERS, pick="layers"))
