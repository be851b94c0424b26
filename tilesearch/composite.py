"""Programs of several compiled kernels, or of one that needs scratch memory, as one callable.

Split-K GEMM writes float32 partial tiles to a workspace that a second kernel sums; einsum-sum's
``reduce_first`` runs a reduce kernel into hi/lo workspaces and then a GEMM on them. An
operator's ``build`` describes such a program as a :class:`Composite`: the compiled kernels in
launch order, each with the names of the tensors it takes, and which of those names are
workspaces. The runner calls it like one kernel, ``composite(*inputs, *outputs)``; export
writes every kernel's library and this launch list into one artifact, and the loader rebuilds
the same sequence from the libraries without TileLang (:mod:`tilesearch.deploy`), so a new
multi-kernel operator needs nothing from deploy.

Workspaces are allocated through PyTorch's allocator once per device, on the first call (call
once before capturing a CUDA graph, as for any kernel), and every program writes what it reads
before reading it, so nothing is zeroed between calls. A workspace dimension may depend on a
run-time size (:class:`Dim`); it is then allocated for the largest size seen so far and passed
as a contiguous view of the size of the call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dim:
    """A run-time dimension: the size ``symbol`` has in this call, rounded up to ``multiple``."""

    symbol: str
    multiple: int = 1

    def size(self, sizes: Mapping[str, int]) -> int:
        return math.ceil(sizes[self.symbol] / self.multiple) * self.multiple

    def to_json(self) -> str:
        return self.symbol if self.multiple == 1 else f"{self.symbol}:{self.multiple}"

    @classmethod
    def from_json(cls, text: str) -> Dim:
        symbol, _, multiple = text.partition(":")
        return cls(symbol, int(multiple or 1))


def resolve(shape: Sequence[int | Dim], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """A shape with every :class:`Dim` replaced by its size in ``sizes``."""
    return tuple(d.size(sizes) if isinstance(d, Dim) else int(d) for d in shape)


def shape_to_json(shape: Sequence[int | Dim]) -> list[int | str]:
    return [d.to_json() if isinstance(d, Dim) else int(d) for d in shape]


def shape_from_json(shape: Sequence[int | str]) -> tuple[int | Dim, ...]:
    return tuple(Dim.from_json(d) if isinstance(d, str) else int(d) for d in shape)


@dataclass(frozen=True)
class Workspace:
    """Scratch memory of a composite program: a name its launches refer to, a shape, a torch
    dtype name (``float32``). ``zeroed``: allocated as zeros, for a program that finds it zero at
    every call and leaves it so (counters that the last of a tile's blocks resets); otherwise
    its contents are whatever the last call left."""

    name: str
    shape: tuple[int | Dim, ...]
    dtype: str
    zeroed: bool = False


@dataclass(frozen=True)
class Launch:
    """One kernel of a composite program and the names of the tensors it takes, in order."""

    kernel: Any
    args: tuple[str, ...]


class Workspaces:
    """The workspaces of one program, allocated once per device with PyTorch's allocator and
    grown (never shrunk) when a run-time size exceeds every earlier one."""

    def __init__(self, specs: Sequence[Workspace]) -> None:
        self.specs = tuple(specs)
        self._buffers: dict[tuple[Any, str], Any] = {}

    def get(self, device: Any, sizes: Mapping[str, int]) -> dict[str, Any]:
        import torch

        views = {}
        for spec in self.specs:
            shape = resolve(spec.shape, sizes)
            numel = math.prod(shape)
            flat = self._buffers.get((device, spec.name))
            if flat is None or flat.numel() < numel:
                alloc = torch.zeros if spec.zeroed else torch.empty
                flat = alloc(numel, device=device, dtype=getattr(torch, spec.dtype))
                self._buffers[(device, spec.name)] = flat
            views[spec.name] = flat[:numel].view(shape)
        return views


class Composite:
    """Kernels run in turn on named tensors: the caller's inputs and outputs, and workspaces.

    Args:
        launches: the kernels in launch order with their argument names.
        inputs: names of the tensors the caller passes, in order.
        outputs: names of the tensors the program writes, passed after the inputs.
        workspaces: the scratch tensors the launches use.
        sizes: for run-time dimensions, symbol -> (input name, axis) that gives its size.
    """

    def __init__(
        self,
        launches: Sequence[Launch],
        *,
        inputs: Sequence[str],
        outputs: Sequence[str],
        workspaces: Sequence[Workspace] = (),
        sizes: Mapping[str, tuple[str, int]] | None = None,
    ) -> None:
        self.launches = tuple(launches)
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self.workspaces = Workspaces(workspaces)
        self.sizes = dict(sizes or {})
        known = set(self.inputs) | set(self.outputs) | {w.name for w in workspaces}
        for launch in self.launches:
            unknown = [a for a in launch.args if a not in known]
            if unknown:
                raise ValueError(f"launch takes {unknown[0]!r}, which is no input, output or workspace")

    def __call__(self, *tensors: Any) -> None:
        names = self.inputs + self.outputs
        if len(tensors) != len(names):
            raise TypeError(f"takes {len(names)} tensors ({', '.join(names)}), got {len(tensors)}")
        named = dict(zip(names, tensors))
        sizes = {symbol: int(named[name].shape[axis]) for symbol, (name, axis) in self.sizes.items()}
        named.update(self.workspaces.get(tensors[0].device, sizes))
        for launch in self.launches:
            launch.kernel(*(named[a] for a in launch.args))

    def get_kernel_source(self) -> str:
        return "\n".join(launch.kernel.get_kernel_source() for launch in self.launches)

