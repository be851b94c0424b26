"""Operator registry: plugins are found through the entry-point group ``tilesearch.ops``.

Our own operators are registered the same way as a third party's (see ``pyproject.toml``). An
operator can also be named by its import path, ``"package.module:ClassName"``, which is how
worker processes and tests load operators that no installed package declares.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from tilesearch.op import Operator

GROUP = "tilesearch.ops"


class UnknownOperatorError(LookupError):
    """No operator of that name is registered."""


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
        raise TypeError(f"{name!r} resolves to {obj!r}, which is not a tilesearch Operator")
    return op
