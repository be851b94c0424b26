"""Kernel artifacts for tests that need no compiler: real metadata around a placeholder library.

The placeholder ``kernel.so`` is not a loadable library; hashing, corruption and architecture
checks all run before the library is opened, so they can be tested with it.
"""

from __future__ import annotations

from pathlib import Path

from tilesearch.deploy.artifact import LIBRARY, SOURCE, Metadata, TensorSpec, seal


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
