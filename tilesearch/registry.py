"""Operator registry: plugins are found through the entry-point group ``tilesearch.ops``.

Our own operators are registered the same way as a third party's (see ``pyproject.toml``). An
operator can also be named by its import path, ``"package.module:ClassName"``, which is how
worker processes and tests load operators that no installed package declares.

A problem parameter may not be named like a key that the entry points take for themselves
(``seed``, ``device``, ``arch``, ``study``, ``out``...: see :func:`reserved`): ``tune(**overrides)``
and ``export(**params)`` would silently take it. Such an operator is refused when it is loaded
or passed in, with :class:`OperatorError`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from importlib.metadata import entry_points

from tilesearch.op import Operator

GROUP = "tilesearch.ops"


class UnknownOperatorError(LookupError):
    """No operator of that name is registered."""


class OperatorError(TypeError):
    """An object is not a usable operator: not an :class:`Operator`, a parameter named like a
    tuning setting, or a class that worker processes cannot import."""


@functools.cache
def available() -> dict[str, str]:
    """Registered operators: name -> import path ``"module:attr"``."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def reference(name: str) -> str:
    """The import path of operator ``name`` (an import path is returned as it is)."""
    if ":" in name:
        return name
    found = available()
    if name not in found:
        known = ", ".join(sorted(found)) or "none (is tilesearch installed with pip install -e .?)"
        raise UnknownOperatorError(f"unknown op {name!r}; registered ops: {known}")
    return found[name]


@functools.cache
def load(name: str) -> Operator:
    """The operator registered as ``name``, or at import path ``"module:attr"``, instantiated."""
    module_name, _, attr = reference(name).partition(":")
    obj = getattr(importlib.import_module(module_name), attr)
    op = obj() if isinstance(obj, type) else obj
    if not isinstance(op, Operator):
        raise OperatorError(f"{name!r} resolves to {obj!r}, which is not a tilesearch Operator")
    return check(op)


@functools.cache
def reserved() -> frozenset[str]:
    """Keys the entry points take for themselves: the tuning settings, the other arguments of
    ``tune``, ``export`` and ``load``, and the command line's ``op``, ``gpus`` and ``workers``."""
    from tilesearch.deploy.exporter import export
    from tilesearch.deploy.loader import load as load_kernel
    from tilesearch.tuner import TuneSettings, tune

    names = set(TuneSettings.keys()) | {"op", "gpus", "workers"}
    for function in (tune, export, load_kernel):
        names |= {p.name for p in inspect.signature(function).parameters.values() if p.kind != p.VAR_KEYWORD}
    return frozenset(names)


def check(op: Operator) -> Operator:
    """``op`` if its parameters can be told apart from the tuning settings; else raises
    :class:`OperatorError` naming the clash."""
    if not isinstance(op, Operator):
        raise OperatorError(f"{op!r} is not a tilesearch Operator")
    clash = [p.name for p in op.params if p.name in reserved()]
    if clash:
        raise OperatorError(
            f"op {op.name!r}: parameter {clash[0]!r} is named like a tuning setting, which tune() and export() "
            f"would take for themselves; rename it (reserved: {', '.join(sorted(reserved()))})"
        )
    return op


def ref(op: Operator) -> str:
    """How worker processes load ``op``: its registered name when that name loads the same class,
    else the import path ``"module:Class"`` of its class (which they instantiate without
    arguments, so an instance must not differ from a fresh one of its class)."""
    cls = type(op)
    registered = available().get(op.name)
    if registered == f"{cls.__module__}:{cls.__qualname__}":
        return op.name
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        raise OperatorError(
            f"op {op.name!r}: class {cls.__qualname__} is defined in {cls.__module__}, where worker processes "
            "cannot import it; define it at module level in an importable module"
        )
    return f"{cls.__module__}:{cls.__qualname__}"
