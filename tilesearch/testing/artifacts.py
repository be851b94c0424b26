"""Kernel artifacts for tests that need no compiler: real metadata around a placeholder library.

The placeholder ``kernel.so`` is not a loadable library; hashing, corruption and architecture
checks all run before the library is opened, so they can be tested with it.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from tilesearch.deploy.artifact import LIBRARY, SOURCE, Metadata, TensorSpec, content_hash, seal


def gemm_metadata(m: int = 256, n: int = 256, k: int = 128, dtype: str = "float16", arch: str = "sm_90a") -> Metadata:
    """Metadata of an ``nn`` GEMM kernel as export would write it, before sealing."""
    return Metadata(
        op="gemm",
        params={"m": m, "n": n, "k": k, "dtype": dtype, "layout": "nn"},
        dtype=dtype,
        layout="nn",
        config={"block_m": 128, "block_n": 128, "block_k": 32},
        arch=arch,
        entry="gemm",
        inputs=(TensorSpec("A", (m, k), dtype), TensorSpec("B", (k, n), dtype)),
        outputs=(TensorSpec("C", (m, n), dtype),),
        gpu="synthetic",
        latency_ms=1.0,
        study="test-study",
        trial=3,
        trial_key="0123456789abcdef",
        synthetic=True,
    )


def write_placeholder(directory: str | Path, metadata: Metadata | None = None) -> Metadata:
    """Writes an artifact with ``metadata`` (default :func:`gemm_metadata`) and a fake library."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LIBRARY).write_bytes(b"\x7fELF placeholder, not a library")
    (directory / SOURCE).write_text("// placeholder\n")
    return seal(directory, metadata or gemm_metadata())


def symbolic_gemm_metadata(n: int, k: int, block_m: int = 128, dtype: str = "float16") -> Metadata:
    """Sealed-hash metadata of an ``nt`` GEMM kernel compiled with M a run-time value."""
    meta = replace(
        gemm_metadata(n=n, k=k, dtype=dtype),
        params={"m": 1, "n": n, "k": k, "dtype": dtype, "layout": "nt"},
        layout="nt",
        config={"block_m": block_m},
        inputs=(TensorSpec("A", ("m", k), dtype), TensorSpec("B", (n, k), dtype)),
        outputs=(TensorSpec("C", ("m", n), dtype),),
        sizes={"m": ["A", 0]},
    )
    return replace(meta, content_hash=content_hash(meta))


def meta_dispatch(n: int, k: int, edges: tuple[int, ...] = (1, 129), hi: int = 16384, launches: list | None = None) -> Any:
    """A :class:`~tilesearch.deploy.dispatch.Dispatch` over ``edges`` (bucket starts) without
    libraries: it serves shape inference (meta and fake tensors); with ``launches``, each
    bucket's launch appends ``(bucket, M)`` there instead of running."""
    from tilesearch.deploy.dispatch import Dispatch
    from tilesearch.deploy.kernel import Kernel

    kernels = []
    for i, _ in enumerate(edges):
        kernel = Kernel(symbolic_gemm_metadata(n, k, block_m=64 << i), launch=None)
        if launches is not None:
            kernel._launch = lambda *t, i=i: launches.append((i, t[0].shape[0]))
        kernels.append(kernel)
    buckets = [{"lo": lo, "hi": (edges[i + 1] - 1 if i + 1 < len(edges) else hi)} for i, lo in enumerate(edges)]
    table = {"format": "tilesearch-dispatch/1", "op": "gemm", "name": "m", "lo": edges[0], "hi": hi,
             "arch": "sm_90a", "key": f"m={edges[0]}..{hi},n={n},k={k}", "buckets": buckets,
             "content_hash": hashlib.sha256(repr((n, k, edges, hi)).encode()).hexdigest()}
    return Dispatch(table, kernels)
