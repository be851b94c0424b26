"""Loaded kernels as ``torch.library`` custom ops, so ``torch.compile`` and CUDA graphs see them.

One op per operator, ``torch.ops.tilesearch.<op>(*inputs, kernel) -> outputs``, where ``kernel``
is the loaded kernel's id (:attr:`Metadata.kernel_id`), and one in-place variant,
``torch.ops.tilesearch.<op>_out(*inputs, kernel, *outputs)``, that writes caller-owned outputs.
The schema comes from the artifact's tensor names (``gemm(Tensor A, Tensor B, str kernel) ->
Tensor``). The fake implementation checks the arguments as a launch would and returns empty
outputs of the right shapes and dtypes, which is all ``torch.compile`` needs to trace a model.
"""

from __future__ import annotations

import re
from typing import Any

from tilesearch.deploy.artifact import ArtifactError

NAMESPACE = "tilesearch"

_LIBRARY: Any = None
_KERNELS: dict[str, Any] = {}
_SCHEMAS: dict[str, tuple[str, str]] = {}


def register(kernel: Any) -> tuple[Any, Any]:
    """Makes ``kernel`` callable through its op; returns the op and its ``_out`` variant."""
    import torch

    global _LIBRARY
    name = _identifier(kernel.metadata.op)
    schemas = _schemas(name, kernel.metadata)
    known = _SCHEMAS.get(name)
    if known is None:
        if _LIBRARY is None:
            _LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")
        _LIBRARY.define(schemas[0])
        _LIBRARY.define(schemas[1])
        _LIBRARY.impl(name, _launch, "CompositeExplicitAutograd")
        _LIBRARY.impl(f"{name}_out", _launch_out, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", _fake, lib=_LIBRARY)
        torch.library.register_fake(f"{NAMESPACE}::{name}_out", _fake_out, lib=_LIBRARY)
        _SCHEMAS[name] = schemas
    elif known != schemas:
        raise ArtifactError(
            f"{NAMESPACE}::{known[0]} is already registered in this process; kernel {kernel.id} "
            f"needs {schemas[0]} (different tensor arguments for the same op)"
        )
    _KERNELS[kernel.id] = kernel
    namespace = getattr(torch.ops, NAMESPACE)
    return getattr(namespace, name), getattr(namespace, f"{name}_out")


def lookup(kernel_id: str) -> Any:
    """The loaded kernel with this id."""
    kernel = _KERNELS.get(kernel_id)
    if kernel is None:
        raise ArtifactError(f"kernel {kernel_id} is not loaded in this process; call tilesearch.load on its artifact first")
    return kernel


def _identifier(name: str) -> str:
    name = re.sub(r"\W", "_", name)
    return name if name[:1].isalpha() else f"t_{name}"


def _schemas(name: str, metadata: Any) -> tuple[str, str]:
    taken = {"kernel"}
    args = []
    for i, spec in enumerate((*metadata.inputs, *metadata.outputs)):
        arg = _identifier(spec.name)
        if arg in taken:
            arg = f"{arg}_{i}"
        taken.add(arg)
        args.append(arg)
    n_in = len(metadata.inputs)
    inputs = ", ".join(f"Tensor {a}" for a in args[:n_in])
    outputs = ", ".join(f"Tensor({chr(ord('a') + i)}!) {a}" for i, a in enumerate(args[n_in:]))
    returns = "Tensor" if len(metadata.outputs) == 1 else "(" + ", ".join(["Tensor"] * len(metadata.outputs)) + ")"
    return f"{name}({inputs}, str kernel) -> {returns}", f"{name}_out({inputs}, str kernel, {outputs}) -> ()"


def _split(args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
    at = next(i for i, a in enumerate(args) if isinstance(a, str))
    return lookup(args[at]), args[:at], args[at + 1 :]


def _launch(*args: Any) -> Any:
    kernel, inputs, _ = _split(args)
    return kernel.run(*inputs)


def _launch_out(*args: Any) -> None:
    kernel, inputs, outputs = _split(args)
    kernel.run(*inputs, out=outputs)


def _fake(*args: Any) -> Any:
    kernel, inputs, _ = _split(args)
    kernel.check(inputs, None, fake=True)
    outputs = kernel.new_outputs(inputs)
    return outputs[0] if len(outputs) == 1 else outputs


def _fake_out(*args: Any) -> None:
    kernel, inputs, outputs = _split(args)
    kernel.check(inputs, outputs, fake=True)
