"""Tries einsum-sum's analytic features (search_spaces/einsum_sum_model.py) in the field benchmark
before the operator uses them, by patching its ``features`` hook in this process:

    python scripts/einsum_features_eval.py DIR OUT [features|features+prior|none]

DIR holds einsum-sum datasets; ``features+prior`` also makes the roofline the cost model's prior.
Runs ``xgb`` over 10 seeds; the table is OUT/results.md.
"""

import sys

from search_spaces import einsum_sum, einsum_sum_model
from tilesearch.experiment.field import main

if __name__ == "__main__":
    data, out, mode = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "features"
    if mode.startswith("features"):
        einsum_sum.EinsumSumOp.features = lambda self, p, c, t: einsum_sum_model.features(p, c, t)
    if mode == "features+prior":
        einsum_sum.EinsumSumOp.estimate = lambda self, p, c, t: einsum_sum_model.roofline(p, c, t)
    sys.exit(main(["--data", data, "--out", out, "--seeds", "10", "--strategies", "xgb"]))
