"""Versions of the software that changes what a kernel does or how fast it runs."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def package(name: str) -> str:
    """The installed version of distribution ``name``, or ``"none"``."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "none"


@functools.cache
def _nvcc() -> str:
    import re
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if not nvcc:
        return "none"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r"release ([\d.]+)", out)
    return match.group(1) if match else "unknown"


def collect(torch_cuda: bool = False) -> dict[str, Any]:
    """Package versions; ``torch_cuda`` adds the CUDA runtime torch was built with."""
    found = {name: package(name) for name in ("tilesearch", "tilelang", "torch", "optuna", "xgboost")}
    if found["xgboost"] == "none":  # the CPU-only wheel installs the same module under another name
        found["xgboost"] = package("xgboost-cpu")
    found["nvcc"] = _nvcc()
    from tilesearch.builder import compiler

    found["compiler"] = compiler.describe()
    if torch_cuda:
        import torch

        found["torch_cuda"] = torch.version.cuda or "none"
    return found


def tag() -> str:
    """Short tag of the versions that decide which kernel a configuration compiles to."""
    return f"tilelang-{package('tilelang')}"
