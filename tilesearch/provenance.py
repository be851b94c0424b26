"""Provenance: what a study's measurements depend on besides the configuration itself.

A measurement is only worth reusing under the conditions it was taken in. The *identity* of a
study says what those were: a hash of the operator's source (the module files of its class and
of every base class outside tilesearch's own interface, so any edit of the plugin changes it),
the knob-semantics version the operator declares (:attr:`tilesearch.op.Operator.knob_version`:
raised when a knob keeps its name but changes its meaning), the versions of TileLang, torch,
the CUDA runtime and compiler and the driver, and where replayed figures came from. The default
study name ends in a short digest of the identity, so a change starts a new study; a study
named explicitly whose identity differs is refused with the differences spelled out
(:class:`StaleStudyError`), and ``tilesearch revalidate`` compares the old results with new ones.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilesearch.space import digest

IDENTITY_ATTR = "identity"  # study attribute
VERSIONS = ("tilelang", "torch", "torch_cuda", "nvcc", "driver")
LABELS = {
    "op_source": "operator source (sha256 of its module files)",
    "knob_version": "knob semantics version",
    "tilelang": "TileLang version",
    "torch": "torch version",
    "torch_cuda": "CUDA runtime version (torch's)",
    "nvcc": "CUDA compiler version",
    "driver": "NVIDIA driver version",
    "measured_by": "source of the figures",
    "compiler": "device-code compiler (TILESEARCH_COMPILER)",
}
_INTERFACE = ("builtins", "abc", "typing", "tilesearch.op")


class StaleStudyError(ValueError):
    """A study whose measurements were taken under other conditions than the current ones."""


def source_hash(op: Any) -> str:
    """SHA-256 of the source files of ``op``'s class and its bases (tilesearch's interface left
    out), in MRO order, each followed by the modules of its own package that it imports, at the
    top or inside a function, and so on within the package (GEMM's cluster program and the
    grouped GEMM's template live in modules of their own, and their edits change what is
    measured); the file contents only, so the same code hashes alike anywhere."""
    sha = hashlib.sha256()
    seen: set[str] = set()

    def add(path: str | None) -> None:
        if path and path not in seen:
            seen.add(path)
            with open(path, "rb") as f:
                sha.update(f.read())

    for cls in type(op).__mro__:
        if cls.__module__ in _INTERFACE:
            continue
        try:
            path = inspect.getsourcefile(cls)
        except TypeError:  # defined in C or interactively: nothing to hash
            continue
        add(path)
        for name in _own_imports(cls.__module__, path):
            add(_module_file(name))
    return sha.hexdigest()


def _own_imports(module: str, path: str | None) -> list[str]:
    """The modules of ``module``'s top-level package that its source at ``path`` imports, and
    those they import in turn (tilesearch's own left out), in the order first found."""
    package = module.split(".")[0]
    if not path or package == "tilesearch" or not path.endswith(".py"):
        return []
    found: list[str] = []
    todo = [(module, path)]
    while todo:
        name, file = todo.pop()
        try:
            targets = _imported(Path(file).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for target in targets:
            if target.split(".")[0] != package or target in found or target == module:
                continue
            source = _module_file(target)
            if source:  # a module (a name imported from one is not)
                found.append(target)
                todo.append((target, source))
    return found


@functools.lru_cache(maxsize=256)
def _imported(source: str) -> tuple[str, ...]:
    """The absolute imports in ``source``, in the order found: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a`` and ``a.b`` (a module or a name). Parsed once a process for
    each text: every study opened hashes its op's source, and parsing GEMM's modules took 0.08 s
    of each, about 100 studies in a range of sizes (2-core CPU machine, 2026-12-03)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return tuple(found)


def _module_file(name: str) -> str | None:
    """The source file of module ``name``, found without importing it; None for a package's
    other names or a module without a Python source."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    return origin if origin and origin.endswith(".py") else None


def identity(op: Any, versions: Mapping[str, Any], measured_by: str = "") -> dict[str, Any]:
    """The identity of measurements of ``op`` under ``versions`` (see the module docstring)."""
    found = {"op_source": source_hash(op), "knob_version": int(getattr(op, "knob_version", 1))}
    found.update({name: str(versions.get(name, "none")) for name in VERSIONS})
    if versions.get("compiler", "nvcc") != "nvcc":  # nvcc's studies keep the identity they had
        found["compiler"] = str(versions["compiler"])
    if measured_by:
        found["measured_by"] = measured_by
    return found


def tag(found: Mapping[str, Any]) -> str:
    """A short digest of an identity, for study names."""
    return f"id-{digest(dict(found))[:10]}"


def differences(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[str]:
    """What differs between two identities, one line each (``old`` ``None``: a study made before
    identities were recorded)."""
    if old is None:
        return ["the study records no identity (made before tilesearch recorded provenance)"]
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            a, b = old.get(key, "absent"), new.get(key, "absent")
            if key == "op_source":
                a, b = str(a)[:12], str(b)[:12]
            lines.append(f"{LABELS.get(key, key)}: {a} -> {b}")
    return lines
