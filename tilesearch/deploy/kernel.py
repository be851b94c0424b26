"""A loaded kernel: a callable on torch tensors, checked against the shapes it was tuned for.

Tensors reach the kernel through DLPack (TVM-FFI reads them in place, no copy) and the launch
goes to the current CUDA stream of the tensors' device, which TVM-FFI asks PyTorch for on every
call; so the kernel orders with surrounding PyTorch work and can be captured in a CUDA graph
(call it once before capturing, as with any kernel that loads its module lazily; a composite
program's workspaces are allocated on that first call too).

A dimension the artifact names by a symbol (``"m"``: a kernel compiled with M as a run-time
value) takes any size; every tensor that names the symbol must agree on it, and the outputs take
it. Under ``torch.compile(dynamic=True)`` the fake implementation passes the symbolic size
through without comparing it to a number, so a new M does not recompile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from tilesearch.deploy import torch_op
from tilesearch.deploy.artifact import BadTensorError, Metadata, check_arch

ALIGNMENT = 16  # bytes: vector loads, cp.async and TMA need 16-byte aligned base addresses


class Kernel:
    """A tuned kernel from an artifact. ``kernel(*inputs)`` returns new outputs;
    ``kernel(*inputs, out=outputs)`` writes into caller-owned ones and returns them.

    In eager mode the call checks its arguments and launches directly; while ``torch.compile``
    traces (or on meta tensors) it goes through the custom op :attr:`op`, which has a fake
    implementation for shape inference.

    Attributes:
        metadata: what the artifact's ``metadata.json`` says.
        path: the artifact directory.
        id: the kernel's id, the ``kernel`` argument of its custom op.
        op: ``torch.ops.tilesearch.<op>``, called as ``op(*inputs, kernel.id)``.
        op_out: ``torch.ops.tilesearch.<op>_out``, called as ``op_out(*inputs, kernel.id, *outputs)``.
    """

    def __init__(self, metadata: Metadata, launch: Callable[..., Any] | None, path: str | Path | None = None) -> None:
        """``launch`` runs the program as ``launch(*inputs, *outputs)`` (a loaded
        :class:`~tilesearch.composite.Composite`); ``None`` makes a kernel for shape inference only."""
        self.metadata = metadata
        self.path = Path(path) if path is not None else None
        self.id = metadata.kernel_id
        self._launch = launch
        self.input_specs = [(s.name, s.shape, getattr(torch, s.dtype)) for s in metadata.inputs]
        self.output_specs = [(s.name, s.shape, getattr(torch, s.dtype)) for s in metadata.outputs]
        self._checked_devices: set[int] = set()
        self.op, self.op_out = torch_op.register(self)

    def __repr__(self) -> str:
        m = self.metadata
        return f"Kernel({m.op} {m.problem_key}, {m.arch}, {self.id})"

    def __call__(self, *inputs: Any, out: Any = None) -> Any:
        compiling = torch.compiler.is_compiling()
        if compiling or (inputs and getattr(inputs[0], "is_meta", False)):
            outputs = None if out is None else (out,) if isinstance(out, torch.Tensor) else tuple(out)
            if not compiling:
                self.check(inputs, outputs, fake=True)
            if outputs is None:
                return self.op(*inputs, self.id)
            self.op_out(*inputs, self.id, *outputs)
            return out
        return self.run(*inputs, out=out)

    def run(self, *inputs: Any, out: Any = None) -> Any:
        """Checks the arguments and launches on the current stream (no custom-op dispatch)."""
        outputs = None if out is None else (out,) if isinstance(out, torch.Tensor) else tuple(out)
        device = self.check(inputs, outputs)
        if device.index not in self._checked_devices:
            self._check_device(device)
        if self._launch is None:
            raise RuntimeError(f"kernel {self.id} was made without its library (metadata only)")
        if outputs is None:
            outputs = self.new_outputs(inputs, device)
            self._launch(*inputs, *outputs)
            return outputs[0] if len(outputs) == 1 else outputs
        self._launch(*inputs, *outputs)
        return out

    def new_outputs(self, inputs: Sequence[Any], device: Any = None) -> tuple[Any, ...]:
        """Empty outputs for ``inputs`` (already checked), on ``device`` or the inputs' one; with
        fake or meta inputs, fake or meta outputs whose run-time dimensions are the inputs'."""
        sizes = self._bind(inputs)
        shapes = [tuple(sizes[d] if isinstance(d, str) else d for d in shape) for _, shape, _ in self.output_specs]
        if device is not None:
            return tuple(torch.empty(s, dtype=t, device=device) for s, (_, _, t) in zip(shapes, self.output_specs))
        return tuple(inputs[0].new_empty(s, dtype=t) for s, (_, _, t) in zip(shapes, self.output_specs))

    def _bind(self, inputs: Sequence[Any]) -> dict[str, Any]:
        """Run-time dimension symbol -> its size in ``inputs`` (the first tensor naming it)."""
        sizes: dict[str, Any] = {}
        for (_, shape, _), tensor in zip(self.input_specs, inputs):
            for dim, size in zip(shape, tensor.shape):
                if isinstance(dim, str):
                    sizes.setdefault(dim, size)
        return sizes

    def check(self, inputs: Sequence[Any], outputs: Sequence[Any] | None, fake: bool = False) -> torch.device:
        """Raises :class:`BadTensorError` unless the tensors fit the kernel; returns their device.

        ``fake``: shape inference (meta or fake tensors), so no data pointers are read.
        """
        specs = self.input_specs
        if len(inputs) != len(specs):
            names = ", ".join(name for name, _, _ in specs)
            raise BadTensorError(f"{self.metadata.op} kernel takes {len(specs)} input tensors ({names}), got {len(inputs)}")
        sizes: dict[str, Any] = {}
        device = self._check_tensor("input", specs[0], inputs[0], None, fake, sizes)
        for spec, tensor in zip(specs[1:], inputs[1:]):
            self._check_tensor("input", spec, tensor, device, fake, sizes)
        if outputs is not None:
            if len(outputs) != len(self.output_specs):
                raise BadTensorError(f"out= takes {len(self.output_specs)} tensors, got {len(outputs)}")
            for spec, tensor in zip(self.output_specs, outputs):
                self._check_tensor("output", spec, tensor, device, fake, sizes)
        return device

    def _check_tensor(
        self, role: str, spec: Any, t: Any, device: torch.device | None, fake: bool, sizes: dict[str, Any]
    ) -> torch.device:
        name, shape, dtype = spec
        if not isinstance(t, torch.Tensor):
            raise BadTensorError(f"{role} {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != dtype:
            raise BadTensorError(f"{role} {name} has dtype {t.dtype}; kernel {self.id} takes {dtype}")
        if not self._shape_fits(shape, t.shape, sizes):
            tuned = tuple(d if isinstance(d, int) else f"{d}={sizes.get(d, d)}" for d in shape)
            raise BadTensorError(
                f"{role} {name} has shape {tuple(t.shape)}; kernel {self.id} was tuned for {tuned} "
                f"({self.metadata.op} {self.metadata.problem_key}): export a kernel for this problem"
            )
        if device is None:
            if t.device.type != "cuda" and not (fake and t.device.type == "meta"):
                raise BadTensorError(f"{role} {name} is on {t.device}; the kernel runs on CUDA devices")
            device = t.device
        elif t.device != device:
            raise BadTensorError(f"{role} {name} is on {t.device}, the first input on {device}: put all on one device")
        if not t.is_contiguous():
            raise BadTensorError(
                f"{role} {name} is not contiguous (strides {t.stride()}); the kernel reads "
                f"{self.metadata.memory_layout} tensors: pass {name}.contiguous()"
            )
        if not fake and t.data_ptr() % ALIGNMENT:
            raise BadTensorError(f"{role} {name}'s data pointer is not {ALIGNMENT}-byte aligned (a view at an odd offset?)")
        return device

    @staticmethod
    def _shape_fits(shape: tuple[Any, ...], actual: Any, sizes: dict[str, Any]) -> bool:
        """Static dimensions equal, run-time ones (symbols) equal across tensors. A symbolic size
        under ``torch.compile`` is compared only with itself, which adds no guard."""
        if len(shape) != len(actual):
            return False
        for dim, size in zip(shape, actual):
            if isinstance(dim, str):
                bound = sizes.setdefault(dim, size)
                if bound is not size and bound != size:
                    return False
            elif size != dim:
                return False
        return True

    def _check_device(self, device: torch.device) -> None:
        major, minor = torch.cuda.get_device_capability(device)
        check_arch(self.metadata, f"sm_{major}{minor}", where=f"{device} ({torch.cuda.get_device_name(device)})")
        self._checked_devices.add(device.index)
