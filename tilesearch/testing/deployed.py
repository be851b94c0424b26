"""On a GPU: does a loaded artifact compute exactly what the tuned program computed?

Used by the GPU tests and by ``experiments/deploy_check.py``.
"""

from __future__ import annotations

from typing import Any


def matches_tuned(op: Any, problem: Any, kernel: Any, config: Any, target: Any, seed: int = 1) -> dict[str, Any]:
    """Runs the tuned program (``op.build``) and the loaded ``kernel`` on the same inputs; returns
    whether the kernel's output equals it bitwise in eager mode (``eager``), under
    ``torch.compile(fullgraph=True)`` (``compile``) and replayed from a CUDA graph (``graph``),
    and the tuned output's relative Frobenius error against the float64 reference."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs = op.make_inputs(problem, "cuda", gen)
    expected = op.make_outputs(problem, "cuda")[0]
    op.build(problem, config, target)(*inputs, expected)
    ref = op.reference(problem, inputs)[0]
    found = {"eager": torch.equal(kernel(*inputs), expected)}
    compiled = torch.compile(lambda *xs: kernel(*xs), fullgraph=True)
    found["compile"] = torch.equal(compiled(*inputs), expected)
    static = torch.empty_like(expected)
    kernel(*inputs, out=static)  # first call: modules and workspaces loaded before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel(*inputs, out=static)
    static.zero_()
    graph.replay()
    torch.cuda.synchronize()
    found["graph"] = torch.equal(static, expected)
    found["rel_err_vs_float64"] = ((expected.double() - ref.double()).norm() / ref.double().norm()).item()
    return found
