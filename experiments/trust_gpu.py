"""Issue 15 on the GPU: are tilesearch's final ratios reproducible within their intervals?

For each of 5 GEMM shapes, two separate searches (``repeats=2``, ``isolate``: each a ``tune`` in a
fresh Python process on a storage cleared first, so nothing of the first reaches the second;
TileLang's compile cache kept) with ``strategy=xgb``; each ends with its own final re-time of its
top configurations beside ``torch.matmul``. Reported per
search: the chosen configuration's ratio to ``torch.matmul`` with its 95% interval (target: at
most +-1% wide), the SM clock NVML read around that re-time and the tie set; per shape: whether
the two searches' intervals overlap (target: they do). All five shapes take about 13 minutes on
an H100 with 16 cores (60-90 s a search); where a call is limited to 10 minutes, run two calls:
``shapes=sq8192_fp16_nn,skinny16_bf16_nt`` and the other three (``budget_s=`` stops starting
searches after that many seconds).

Writes ``trust_gpu.{json,txt,log}`` and the searches' studies (``trust_gpu-studies/``) under
``out`` and prints the table, then the verdicts (``replot=FILE`` prints both again from a
recorded ``trust_gpu.json``).

usage: source scripts/gpu-host.sh && python experiments/trust_gpu.py out=$OUT [trials=40] [shapes=a,b]
"""

import sys

from tilesearch.experiment import Experiment, main

SHAPES = {  # name: problem
    "sq8192_fp16_nn": {"m": 8192, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn"},
    "skinny16_bf16_nt": {"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
    "sq4096_bf16_nt": {"m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
    "mlp_2048x14336x4096_bf16_nt": {"m": 2048, "n": 14336, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
    "odd_3000x5000x4000_fp16_nn": {"m": 3000, "n": 5000, "k": 4000, "dtype": "float16", "layout": "nn"},
}

TRUST = Experiment(
    name="trust_gpu", op="gemm", problems=tuple(SHAPES.values()), strategies=("xgb",), trials=40, repeats=2, isolate=True,
    top=0, settings={"retime": 5}, title="final ratios of two separate searches per shape",
)


def verdicts(result: dict) -> str:
    """Per shape with two finals: do their intervals overlap, are both within +-1%? And, to tell
    measurement from search when they miss: do the configurations both finals re-timed agree?"""
    lines = []
    for prob in result["problems"]:
        finals = [s["final"] for s in prob["searches"] if (s.get("final") or {}).get("speedup_low") is not None]
        if len(finals) == 2:
            a, b = finals
            overlap = a["speedup_low"] <= b["speedup_high"] and b["speedup_low"] <= a["speedup_high"]
            narrow = all((f["speedup_high"] - f["speedup_low"]) / 2 / f["speedup"] <= 0.01 for f in finals)
            line = f"{prob['key']}: intervals overlap {overlap}; both within +-1% {narrow}"
            if "entries" in a and "entries" in b:  # finals record their entries since commit d946545
                key = lambda e: tuple(sorted(e["config"].items()))  # noqa: E731
                theirs = {key(e): e for e in b["entries"]}
                both = [(e, theirs[key(e)]) for e in a["entries"] if key(e) in theirs]
                agree = sum(x["speedup_low"] <= y["speedup_high"] and y["speedup_low"] <= x["speedup_high"] for x, y in both)
                line += f"; re-timed by both: {len(both)}, their intervals overlap for {agree}"
            lines.append(line)
    return "\n".join(lines) or "no shape has two finals"


if __name__ == "__main__":
    sys.exit(main(TRUST, catalog=SHAPES, pick="shapes", verdict=verdicts))
