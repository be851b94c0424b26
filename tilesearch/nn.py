"""A drop-in for ``torch.nn.Linear`` that runs a tuned GEMM for every batch size.

``Linear.from_linear(linear, m=(1, 16384))`` loads the dispatch artifact of the range tuned for
``gemm m=1..16384 n=out_features k=in_features layout=nt`` (``nn.Linear`` keeps its weight as
``out x in``, which is GEMM's ``nt`` layout, so the weight is used as it is) and keeps the
layer's weight and bias. :func:`swap_linears` does this for every ``nn.Linear`` of a module.

Every leading dimension of the input is folded into M, so one kernel call serves any batch and
sequence length in the range; the bias is added by PyTorch after the GEMM. The kernel goes
through its ``torch.library`` op, so the layer works in eager mode, under
``torch.compile(fullgraph=True, dynamic=True)`` with one graph for every M, and in CUDA graphs
(call it once at the largest M before capturing: the split-K workspaces are allocated then).
"""

from __future__ import annotations

from typing import Any

import torch

DEFAULT_RANGE = (1, 16384)


class Linear(torch.nn.Module):
    """``y = x @ weight.T + bias`` with a tuned (dispatching) GEMM kernel.

    Args:
        kernel: a loaded kernel of ``gemm`` with ``layout=nt``, ``n=out_features``,
            ``k=in_features`` (usually a :class:`~tilesearch.deploy.dispatch.Dispatch`).
        weight: ``out_features x in_features``, in the kernel's dtype, on a CUDA device.
        bias: ``out_features`` or ``None``.
    """

    def __init__(self, kernel: Any, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        params = kernel.metadata.params
        if kernel.metadata.op != "gemm" or params.get("layout") != "nt":
            raise ValueError(f"Linear needs a gemm kernel with layout=nt, got {kernel.metadata.op} {kernel.metadata.problem_key}")
        if tuple(weight.shape) != (params["n"], params["k"]):
            raise ValueError(
                f"weight is {tuple(weight.shape)} but the kernel was tuned for n={params['n']}, k={params['k']} "
                "(out_features x in_features)"
            )
        self.kernel = kernel
        self.in_features, self.out_features = params["k"], params["n"]
        self.weight = torch.nn.Parameter(weight.detach().contiguous(), requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().contiguous(), requires_grad=False)

    @classmethod
    def from_linear(
        cls,
        linear: torch.nn.Linear,
        *,
        kernel: Any = None,
        m: tuple[int, int] = DEFAULT_RANGE,
        storage: str | None = None,
        cache_dir: str | None = None,
        arch: str | None = None,
    ) -> Linear:
        """The layer with its weight and bias, computed by ``kernel`` or by the tuned range
        ``m`` of its shape and dtype looked up in ``storage`` (see :func:`tilesearch.load`)."""
        if kernel is None:
            from tilesearch.deploy import load

            dtype = str(linear.weight.dtype).removeprefix("torch.")
            kernel = load(op="gemm", m=tuple(m), n=linear.out_features, k=linear.in_features, dtype=dtype,
                          layout="nt", storage=storage, cache_dir=cache_dir, arch=arch)
        return cls(kernel, linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if not rows.is_contiguous():
            rows = rows.contiguous()
        y = self.kernel(rows, self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, kernel={self.kernel.id}"


def swap_linears(module: torch.nn.Module, kernels: Any = None, **load_options: Any) -> torch.nn.Module:
    """Replaces every ``nn.Linear`` in ``module`` (in place) by a :class:`Linear`; returns it.

    ``kernels`` maps ``(out_features, in_features)`` to a loaded kernel; a shape it does not
    hold (or all, without it) is looked up by :meth:`Linear.from_linear` with ``load_options``.
    """
    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.Linear):
            kernel = (kernels or {}).get((child.out_features, child.in_features))
            setattr(module, name, Linear.from_linear(child, kernel=kernel, **load_options))
        else:
            swap_linears(child, kernels, **load_options)
    return module
