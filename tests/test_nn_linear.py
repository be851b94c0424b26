"""The nn.Linear drop-in without a GPU: shapes, bias, module swapping, one graph for every M
under ``torch.compile(dynamic=True)`` (meta tensors; the kernels are shape inference only)."""

import pytest
import torch

from tilesearch.nn import Linear, swap_linears
from tilesearch.testing.artifacts import meta_dispatch

HIDDEN, INTER = 256, 512


def mlp(bias=False):
    with torch.device("meta"):
        block = torch.nn.ModuleDict({
            "gate": torch.nn.Linear(HIDDEN, INTER, bias=bias, dtype=torch.float16),
            "up": torch.nn.Linear(HIDDEN, INTER, bias=bias, dtype=torch.float16),
            "down": torch.nn.Linear(INTER, HIDDEN, bias=bias, dtype=torch.float16),
        })
    return block


def kernels():
    return {(INTER, HIDDEN): meta_dispatch(INTER, HIDDEN), (HIDDEN, INTER): meta_dispatch(HIDDEN, INTER)}


def forward(block, x):
    return block["down"](torch.nn.functional.silu(block["gate"](x)) * block["up"](x))


def test_from_linear_keeps_weight_and_bias_and_folds_leading_dims():
    linear = mlp(bias=True)["gate"]
    layer = Linear.from_linear(linear, kernel=meta_dispatch(INTER, HIDDEN))
    assert layer.weight.shape == (INTER, HIDDEN) and layer.bias.shape == (INTER,)
    y = layer(torch.empty(3, 5, HIDDEN, dtype=torch.float16, device="meta"))
    assert y.shape == (3, 5, INTER) and y.dtype == torch.float16
    assert "kernel=gemm-" in repr(layer)


def test_a_kernel_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="tuned for n=256, k=512"):
        Linear.from_linear(mlp()["gate"], kernel=meta_dispatch(HIDDEN, INTER))


def test_swap_linears_replaces_every_linear():
    block = swap_linears(mlp(), kernels())
    assert all(isinstance(m, Linear) for m in block.values())
    assert forward(block, torch.empty(7, HIDDEN, dtype=torch.float16, device="meta")).shape == (7, HIDDEN)


def test_one_graph_for_every_batch_size_under_dynamic_compile():
    block = swap_linears(mlp(bias=True), kernels())
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    compiled = torch.compile(lambda x: forward(block, x), fullgraph=True, dynamic=True, backend=backend)
    for batch in (2, 9, 300, 4096, 1, 1, 77):
        assert compiled(torch.empty(batch, HIDDEN, dtype=torch.float16, device="meta")).shape == (batch, HIDDEN)
    # one graph with a symbolic M; PyTorch specializes size 1 (its 0/1 rule), once, not per M
    assert len(graphs) == 2
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "tilesearch" in str(n.target)]
    assert len(calls) == 3
