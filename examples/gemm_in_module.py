"""Tune a GEMM, export it, and use it as the projection of a small PyTorch block.

The block is ``layernorm(gelu(x @ W.T + bias))`` with ``W`` an ``nn.Linear``-style weight
(``out_features x in_features``), so the GEMM is tilesearch's ``layout=nt``. The tuned block is
checked against the same block computed with ``torch.nn.functional.linear``, eagerly and under
``torch.compile(fullgraph=True)``. Needs a CUDA GPU.

    python examples/gemm_in_module.py --trials 8 --out out/example
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import tilesearch

PROBLEM = {"m": 512, "n": 1024, "k": 512, "dtype": "float16", "layout": "nt"}


class TunedProjection(torch.nn.Module):
    """``layernorm(gelu(x @ weight.T + bias))`` with the GEMM done by a tuned kernel.

    The kernel was tuned for one shape: ``x`` must be ``(m, k)``, ``weight`` ``(n, k)``.
    """

    def __init__(self, kernel: Any, weight: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        self.kernel = kernel
        self.register_buffer("weight", weight)
        self.register_buffer("bias", bias)
        self.norm = torch.nn.LayerNorm(weight.shape[0], device=weight.device, dtype=weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.kernel(x, self.weight) + self.bias))


class ReferenceProjection(TunedProjection):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(F.linear(x, self.weight, self.bias)))


def ref_program(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, norm: Any) -> torch.Tensor:
    """The block in float64, the yardstick for both the tuned and the PyTorch block."""
    y = F.gelu(x.double() @ weight.double().T + bias.double())
    return F.layer_norm(y, y.shape[-1:], norm.weight.double(), norm.bias.double())


def main(out: str | Path = "out/example", trials: int = 8, storage: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Tunes (resuming the study if ``storage`` has one), exports to ``out/kernel``, checks the block.

    Returns the errors of the tuned and the PyTorch block against the float64 reference.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    storage = storage or f"sqlite:///{out / 'tune.db'}"
    result = tilesearch.tune("gemm", PROBLEM, storage=storage, trials=trials, seed=seed, strategy="tpe", progress=False)
    print(f"tuned {result.study}: best {result.best[0].latency_ms:.4f} ms" if result.best else "no correct config")
    tilesearch.export("gemm", out=out / "kernel", storage=storage, **PROBLEM)
    kernel = tilesearch.load(out / "kernel")

    g = torch.Generator(device="cuda").manual_seed(seed)
    m, n, k = PROBLEM["m"], PROBLEM["n"], PROBLEM["k"]
    x = torch.randn(m, k, device="cuda", generator=g).half()
    weight = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).half()
    bias = torch.randn(n, device="cuda", generator=g).half()
    tuned = TunedProjection(kernel, weight, bias).eval()
    reference = ReferenceProjection(kernel, weight, bias).eval()
    reference.norm.load_state_dict(tuned.norm.state_dict())

    with torch.no_grad():
        expected = ref_program(x, weight, bias, tuned.norm)
        got = {
            "tuned": tuned(x),
            "tuned, torch.compile(fullgraph=True)": torch.compile(tuned, fullgraph=True)(x),
            "pytorch": reference(x),
        }
    errors = {name: ((y.double() - expected).norm() / expected.norm()).item() for name, y in got.items()}
    for name, err in errors.items():
        print(f"{name:40s} relative error vs float64: {err:.2e}")
    limit = 10 * errors["pytorch"] + 1e-3
    bad = {name: err for name, err in errors.items() if err > limit}
    if bad:
        raise AssertionError(f"tuned block off the reference: {bad} (PyTorch's error is {errors['pytorch']:.2e})")
    return errors


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/example")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    main(args.out, args.trials, args.storage)
