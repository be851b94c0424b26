"""Imported once by the process the compile pool's workers are forked from
(:func:`tilesearch.workers.preload`): TileLang, this package's compile path, and, with NVRTC
chosen, its precompiled header for ``sm_90a`` (the arch ``tune`` compiles for unless told
otherwise; a worker for another makes its own as it starts). Each forked worker then starts with
all of it made, where 15 spawned workers each made it again, at once
(:class:`~tilesearch.workers.IsolatedWorker`).

Made here, the header holds every fork for its 3 s on the H200 host, unless an earlier run on this
machine recorded its code (:func:`~tilesearch.builder.compiler.early_header`): then it is made in a
thread while TileLang is imported, and the forks wait only for the longer of the two. Made by each worker in a
thread while it lowered its first candidate instead, 15 headers and 15 lowerings at once on 16
cores would each take about twice as long, and on a 2-core machine the first kernel came after
11.2 s against 5.5 s this way.

The compiler is not installed here (:func:`~tilesearch.builder.compiler.install` switches a hook and
a cache folder): each worker installs the one its own environment names when it compiles.
Nothing here may fail the fork server: a failure shows where the worker compiles.
"""

import logging

from tilesearch.builder import compiler  # imports no TileLang

try:
    nvrtc = compiler.chosen() == "nvrtc"
    if nvrtc:  # begun from what the last run recorded, beside the import
        compiler.early_header("sm_90a")

    from tilesearch.tilelang_import import import_tilelang

    import_tilelang()  # without ml_dtypes (see there)

    from tilesearch.builder import local  # noqa: F401 - what compile_candidate imports

    if nvrtc:
        compiler.make_header("sm_90a", background=False)
except Exception as exc:  # noqa: BLE001 - see the module docstring
    logging.getLogger(__name__).debug("warm-up of the fork server failed: %s", exc)
finally:
    compiler.wait_for_header("sm_90a")  # no thread may run where it forks
