"""A loaded kernel: a callable on torch tensors, checked against the shapes it was tuned for.

Tensors reach the kernel through DLPack (TVM-FFI reads them in place, no copy) and the launch
goes to the current CUDA stream of the tensors' device, which TVM-FFI asks PyTorch for on every
call; so the kernel orders with surrounding PyTorch work and can be captured in a CUDA graph
(call it once before capturing, as with any kernel that loads its module lazily).
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
            outputs = tuple(torch.empty(shape, dtype=dtype, device=device) for _, shape, dtype in self.output_specs)
            self._launch(*inputs, *outputs)
            return outputs[0] if len(outputs) == 1 else outputs
        self._launch(*inputs, *outputs)
        return out

    def check(self, inputs: Sequence[Any], outputs: Sequence[Any] | None, fake: bool = False) -> torch.device:
        """Raises :class:`BadTensorError` unless the tensors fit the kernel; returns their device.

        ``fake``: shape inference (meta or fake tensors), so no data pointers are read.
        """
        specs = self.input_specs
        if len(inputs) != len(specs):
            names = ", ".join(name for name, _, _ in specs)
            raise BadTensorError(f"{self.metadata.op} kernel takes {len(specs)} input tensors ({names}), got {len(inputs)}")
        device = self._check_tensor("input", specs[0], inputs[0], None, fake)
        for spec, tensor in zip(specs[1:], inputs[1:]):
            self._check_tensor("input", spec, tensor, device, fake)
        if outputs is not None:
            if len(outputs) != len(self.output_specs):
                raise BadTensorError(f"out= takes {len(self.output_specs)} tensors, got {len(outputs)}")
            for spec, tensor in zip(self.output_specs, outputs):
                self._check_tensor("output", spec, tensor, device, fake)
        return device

    def _check_tensor(self, role: str, spec: Any, t: Any, device: torch.device | None, fake: bool) -> torch.device:
        name, shape, dtype = spec
        if not isinstance(t, torch.Tensor):
            raise BadTensorError(f"{role} {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != dtype:
            raise BadTensorError(f"{role} {name} has dtype {t.dtype}; kernel {self.id} takes {dtype}")
        if t.shape != shape:
            raise BadTensorError(
                f"{role} {name} has shape {tuple(t.shape)}; kernel {self.id} was tuned for {shape} "
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

    def _check_device(self, device: torch.device) -> None:
        major, minor = torch.cuda.get_device_capability(device)
        check_arch(self.metadata, f"sm_{major}{minor}", where=f"{device} ({torch.cuda.get_device_name(device)})")
        self._checked_devices.add(device.index)
