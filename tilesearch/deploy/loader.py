"""Load: artifact directory (or a problem looked up in the database) -> :class:`Kernel`.

Loading verifies the artifact's hashes, refuses a binary built for another GPU architecture,
and opens its libraries with TVM-FFI (one per kernel of a composite program, run in turn as a
:class:`~tilesearch.composite.Composite` with the workspaces the metadata lists). It compiles nothing and does not import TileLang's compiler:
the CUDA binary is embedded in the library, and only TVM's runtime library (shipped with
TileLang) is needed to load it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from tilesearch.composite import Composite, Launch, Workspace, shape_from_json
from tilesearch.deploy.artifact import (
    METADATA,
    ArtifactError,
    CorruptArtifactError,
    Metadata,
    check_arch,
    read,
)

RUNTIME = {"loaded_by": None}  # how TVM's runtime got into this process: "tilelang" or "runtime-library"


def load(
    path: str | os.PathLike[str] | None = None,
    /,
    *,
    op: str | None = None,
    arch: str | None = None,
    storage: str | None = None,
    study: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **params: Any,
) -> Any:
    """A tuned kernel as a callable on torch tensors (see :class:`~tilesearch.deploy.kernel.Kernel`).

    ``load(DIR)`` opens an exported artifact. ``load(op="gemm", m=..., n=..., k=...)`` looks the
    problem's best correct trial up in ``storage`` (or ``study``) and opens its artifact in
    ``cache_dir`` (default ``$TILESEARCH_KERNELS`` or ``~/.cache/tilesearch/kernels``),
    exporting it there first if it is not there yet.

    ``arch`` is the architecture to check the artifact against; by default the current CUDA
    device's (no check without a GPU: the kernel then serves shape inference only).

    Raises:
        CorruptArtifactError: a file does not match its hash, or is missing.
        ArchitectureError: the artifact was compiled for another GPU architecture.
        NoTrialError: (by problem) no correct trial in the database.
    """
    if path is not None:
        if op is not None or params:
            raise TypeError("load takes an artifact directory or op=... with the problem's parameters, not both")
        from tilesearch.deploy.dispatch import is_dispatch, open_dispatch

        return open_dispatch(path, arch=arch) if is_dispatch(path) else open_artifact(path, arch=arch)
    if op is None:
        raise TypeError("load needs an artifact directory, or op=... with the problem's parameters")
    from tilesearch import ranges

    if any(ranges.is_range(v) for v in params.values()):
        return _load_range(op, arch, storage, cache_dir, params)
    return _load_tuned(op, arch, storage, study, cache_dir, params)


def open_artifact(path: str | os.PathLike[str], arch: str | None = None) -> Any:
    """Verifies and opens one artifact directory (see :func:`load`)."""
    from tilesearch.deploy.kernel import Kernel

    path = Path(path)
    metadata = read(path)
    device_arch = arch or _current_arch()
    if device_arch is not None:
        check_arch(metadata, device_arch, "the current CUDA device" if arch is None else "the requested architecture")
    return Kernel(metadata, program(metadata, path), path)


def program(metadata: Metadata, path: Path) -> Composite:
    """The artifact's launches as a :class:`Composite` of the functions in its libraries."""
    modules: dict[str, Any] = {}
    launches = []
    for spec in metadata.launch_list:
        if spec.library not in modules:
            modules[spec.library] = _load_library(path / spec.library)
        try:
            function = modules[spec.library][spec.entry]
        except (AttributeError, KeyError, RuntimeError):
            raise CorruptArtifactError(f"{path / spec.library} has no function {spec.entry!r}") from None
        launches.append(Launch(function, spec.args))
    return Composite(
        launches,
        inputs=[t.name for t in metadata.inputs],
        outputs=[t.name for t in metadata.outputs],
        workspaces=[Workspace(w.name, shape_from_json(w.shape), w.dtype, w.zeroed) for w in metadata.workspaces],
        sizes={symbol: (str(where[0]), int(where[1])) for symbol, where in metadata.sizes.items()},
    )


def default_cache_dir() -> Path:
    return Path(os.environ.get("TILESEARCH_KERNELS") or Path.home() / ".cache" / "tilesearch" / "kernels")


def _load_tuned(op: str, arch: str | None, storage: str | None, study: str | None, cache_dir: Any, params: dict) -> Any:
    from tilesearch import registry, versions
    from tilesearch.deploy.exporter import best_trial, export

    operator = registry.load(op)
    problem = operator.problem(**params)
    device_arch = arch or _current_arch()
    choice = best_trial(operator, problem, storage=storage, study=study, arch=device_arch, gpu=_current_gpu())
    directory = Path(cache_dir or default_cache_dir()) / f"{operator.name}-{choice.record.key[:16]}-{versions.tag()}"
    return _cached(
        directory,
        lambda: open_artifact(directory, arch=arch),
        lambda: export(operator, problem, out=directory, storage=storage, study=choice.study, arch=choice.target.arch),
    )


def _load_range(op: str, arch: str | None, storage: str | None, cache_dir: Any, params: dict) -> Any:
    """The tuned range's dispatch artifact, exported into the cache on first use."""
    import hashlib
    import json

    from tilesearch import range_tuner, ranges, registry, versions
    from tilesearch.deploy.dispatch import export_range, open_dispatch
    from tilesearch.deploy.exporter import NoTrialError

    operator = registry.load(op)
    size_range, rest = ranges.parse(operator, params)
    key = ranges.range_key(operator, size_range, rest)
    device_arch = arch or _current_arch()
    found = range_tuner.find(storage, operator.name, key, device_arch)
    if not found:
        raise NoTrialError(f"no tuned range {operator.name} {key} in the storage; run tilesearch tune with the range first")
    result = max(found, key=lambda r: len(r.heldout))  # the certified one, if any
    digest = hashlib.sha256(json.dumps(result.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
    directory = Path(cache_dir or default_cache_dir()) / f"{operator.name}-range-{digest}-{versions.tag()}"
    return _cached(directory, lambda: open_dispatch(directory, arch=arch), lambda: export_range(result, directory))


def _cached(directory: Path, open_: Any, export: Any) -> Any:
    """Opens the artifact in the cache ``directory``, exporting it there first if it is not
    there or no longer matches its hashes."""
    if (directory / METADATA).is_file():
        try:
            return open_()
        except CorruptArtifactError as exc:
            warnings.warn(f"{exc}; exporting it again", stacklevel=4)
    export()
    return open_()


def _current_arch() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def _current_gpu() -> str | None:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def _load_library(path: Path) -> Any:
    import tvm_ffi

    _ensure_runtime()
    try:
        return tvm_ffi.load_module(str(path))
    except Exception as exc:  # noqa: BLE001 - TVM-FFI raises several kinds
        if "loader" in str(exc) and RUNTIME["loaded_by"] != "tilelang":
            _import_tilelang()
            return tvm_ffi.load_module(str(path))
        raise ArtifactError(f"cannot load {path}: {str(exc).strip().splitlines()[-1]}") from None


def _ensure_runtime() -> None:
    """Puts TVM's runtime (the loader of the library's embedded CUDA binary) into the process.

    If TileLang is imported, it is there. Else the libraries that TileLang ships are opened by
    themselves, without TileLang's Python compiler: TVM's runtime, and TileLang's own library, which
    registers the host functions that kernels call at launch (``__tvm_tensormap_create_tiled``
    builds the TMA descriptors; on an H100 it was missing with the runtime alone). If that fails,
    TileLang is imported.
    """
    if RUNTIME["loaded_by"] is not None:
        return
    if "tilelang" in sys.modules:
        RUNTIME["loaded_by"] = "tilelang"
        return
    spec = importlib.util.find_spec("tilelang")
    if spec is None or not spec.submodule_search_locations:
        raise ArtifactError("loading a kernel needs TVM's runtime, which comes with tilelang: pip install tilelang")
    libraries = Path(spec.submodule_search_locations[0]) / "lib"
    try:
        for name in ("libtvm_runtime.so", "libtilelang.so"):
            ctypes.CDLL(str(libraries / name), mode=ctypes.RTLD_GLOBAL | os.RTLD_LAZY)
        RUNTIME["loaded_by"] = "runtime-library"
    except OSError:
        _import_tilelang()


def _import_tilelang() -> None:
    import tilelang  # noqa: F401

    RUNTIME["loaded_by"] = "tilelang"
