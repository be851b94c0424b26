"""TileLang imported in tilesearch's own worker processes without ml_dtypes.

Why: TileLang's TVM and its FFI import ml_dtypes where it is installed, only to convert NumPy
arrays of its types (bfloat16, float8, int4, ...). That import registers NumPy ufunc loops for
each of those types, and NumPy 2 checks each new loop against the ones before it: on the CPU
machine (NumPy 2.4, ml_dtypes 0.7) ``import tilelang`` took 1.44-1.57 s after torch, 0.82-0.86 s
without ml_dtypes (3 runs each). On the H100 host (NumPy 2.5, ml_dtypes 0.6) the import took
0.79-0.85 s either way (2026-12-07): the cost depends on the versions installed. The compile
pool's fork server imports TileLang before the first kernel compiles, so the first measured
trial waits on it (:mod:`tilesearch.builder.warm`); each measuring worker, spare and final
re-time process imports it before it times (:func:`tilesearch.runner.measure.warm_up`).

Nothing in those processes needs the conversions: kernels are compiled from tile programs and
called with torch tensors, and the kernels' code is the same either way
(``tests/test_tilelang_import.py``). So there, ``import ml_dtypes`` fails while TileLang and the
module its kernels' export imports later (``tvm.contrib.tvmjs``, which would import ml_dtypes at a
worker's first compile) are imported; each then keeps ``ml_dtypes = None``, as where it is not
installed. Afterwards ``import ml_dtypes`` works again, for an operator plugin that uses it.

Processes of the user's (``tilesearch.load`` in a model) import TileLang as it comes.
"""

from __future__ import annotations

import importlib
import sys

# imported with TileLang: each would otherwise import ml_dtypes later, in the middle of some work
_ALSO = ("tvm.contrib.tvmjs",)  # by export_library, as TileLang's cache saves each compiled kernel


def import_tilelang() -> None:
    """Imports TileLang (and :data:`_ALSO`) with ml_dtypes hidden, unless either is already imported."""
    if "tilelang" in sys.modules or "ml_dtypes" in sys.modules:
        import tilelang  # noqa: F401

        return
    sys.modules["ml_dtypes"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        import tilelang  # noqa: F401 - before TVM

        for name in _ALSO:
            importlib.import_module(name)
    finally:
        if "ml_dtypes" in sys.modules and sys.modules["ml_dtypes"] is None:
            del sys.modules["ml_dtypes"]
