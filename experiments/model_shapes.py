"""The model-shape suite (issue 13): the projection GEMMs of public model families, layout ``nt``
(``nn.Linear``: x @ W.T with W stored N x K), tuned and re-timed beside cuBLAS (``torch.matmul``,
the baseline) and Triton's ``@triton.autotune`` matmul in one worker, interleaved, with intervals.

Shapes come from each model's published ``config.json``: hidden size H, intermediate size I,
attention heads A and KV heads V with head size D = H / A give, per layer,
``qkv`` (N = (A + 2V) D, K = H), ``o`` (N = H, K = A D), ``gate_up`` (N = 2I fused, K = H) and
``down`` (N = H, K = I); M is the number of tokens, {1, 16, 128, 512, 2048, 8192}; bfloat16 and
float16. ``odd`` adds unaligned and short-K shapes that cuBLAS handles well.

The whole product is 248 problems, far more than one GPU session: by default the suite
runs a subset of 6 (40 ``xgb`` trials each; on an H100 five of them took 441 s with ``budget_s=360``); ``models=``, ``ms=``,
``dtypes=`` and ``projections=`` select from the whole product instead (each narrows it;
``models=odd`` is the unaligned set), and ``shapes=`` picks catalog names
(``llama3_8b.qkv.m2048.bfloat16``).

usage: python experiments/model_shapes.py out=$OUT [models=llama3_8b,qwen2_5_7b] [ms=16,2048] [dtypes=bfloat16]
"""

import sys
from dataclasses import replace

from tilesearch.experiment import Experiment, main

MODELS = {  # hidden, intermediate, heads, kv heads (each model's config.json on its Hugging Face page)
    "llama3_8b": (4096, 14336, 32, 8),  # meta-llama/Meta-Llama-3-8B (Mistral-7B has the same projections)
    "llama3_70b": (8192, 28672, 64, 8),  # meta-llama/Meta-Llama-3-70B
    "qwen2_5_7b": (3584, 18944, 28, 4),  # Qwen/Qwen2.5-7B
    "qwen2_5_72b": (8192, 29568, 64, 8),  # Qwen/Qwen2.5-72B
    "phi3_mini": (3072, 8192, 32, 32),  # microsoft/Phi-3-mini-4k-instruct
}
MS = (1, 16, 128, 512, 2048, 8192)
DTYPES = ("bfloat16", "float16")
ODD = {"odd.unaligned": (3000, 5000, 4000), "odd.short_k": (8192, 8192, 256), "odd.prime": (1021, 4093, 2039),
       "odd.short_k_wide": (2048, 14336, 512)}


def projections(hidden: int, inter: int, heads: int, kv: int) -> dict[str, tuple[int, int]]:
    head = hidden // heads
    return {"qkv": ((heads + 2 * kv) * head, hidden), "o": (hidden, heads * head), "gate_up": (2 * inter, hidden),
            "down": (hidden, inter)}


TAGS = {f"{model}.{proj}.m{m}.{dtype}": {"models": model, "projections": proj, "ms": str(m), "dtypes": dtype,
                                         "shape": (m, n, k)}
        for model, dims in MODELS.items() for proj, (n, k) in projections(*dims).items() for m in MS for dtype in DTYPES}
TAGS.update({f"{name}.{dtype}": {"models": "odd", "projections": name[4:], "ms": str(m), "dtypes": dtype, "shape": (m, n, k)}
             for name, (m, n, k) in ODD.items() for dtype in DTYPES})
CATALOG = {name: dict(zip(("m", "n", "k"), t["shape"]), dtype=t["dtypes"], layout="nt") for name, t in TAGS.items()}
DEFAULT = ("llama3_8b.qkv.m16.bfloat16", "llama3_8b.o.m2048.bfloat16", "llama3_8b.gate_up.m2048.bfloat16",
           "llama3_8b.down.m2048.bfloat16", "qwen2_5_7b.qkv.m512.float16", "odd.short_k.bfloat16")

MODEL_SHAPES = Experiment(
    name="model_shapes", op="gemm", problems=tuple(CATALOG[name] for name in DEFAULT), strategies=("xgb",),
    trials=40, top=3, peers=("torch", "triton"), title="model projections (nt) against cuBLAS and Triton autotune",
)

SELECTED: dict[str, set[str]] = {}  # what the command line's selection keys chose so far


def _select(key: str):
    """A selection key: the catalog's problems whose ``key`` is one of the values, and that
    match every other selection key given so far (so each narrows the whole product)."""
    def narrow(experiment, value):
        SELECTED[key] = {v for v in value.split(",") if v}
        names = [n for n, tags in TAGS.items() if all(tags[k] in vals for k, vals in SELECTED.items())]
        return replace(experiment, problems=tuple(CATALOG[n] for n in names))
    return narrow


OPTIONS = {key: _select(key) for key in ("models", "projections", "ms", "dtypes")}

if __name__ == "__main__":
    sys.exit(main(MODEL_SHAPES, catalog=CATALOG, pick="shapes", options=OPTIONS))
