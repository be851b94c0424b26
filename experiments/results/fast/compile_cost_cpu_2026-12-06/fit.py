"""Log-linear fit of compile seconds on GEMM knob values (compile_time.json of experiments/compile_time.py)."""
import json
import sys

import numpy as np

rows = json.load(open(sys.argv[1]))["variants"][0]["rows"]
names = ["warp_specialize=off", "persistent", "num_stages>=3", "block_k>=128", "tma=False", "epilogue=direct"]


def feats(c):
    return [1, c["warp_specialize"] == "off", c["persistent"], c["num_stages"] >= 3, c["block_k"] >= 128,
            not c["tma"], c["epilogue"] == "direct"]


X = np.array([feats(r["config"]) for r in rows], float)
y = np.log([r["compile_s"] for r in rows])
b, *_ = np.linalg.lstsq(X, y, rcond=None)
p = X @ b
print(f"{len(rows)} configurations, compile seconds {np.exp(y).min():.2f} to {np.exp(y).max():.2f}, "
      f"R^2 {1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum():.2f}")
for name, coef in zip(names, b[1:]):
    print(f"{name:22s} x{np.exp(coef):.2f}")
