"""Imported once by the process the compile pool's workers are forked from
(:func:`tilesearch.workers.preload`): TileLang, this package's compile path, and, with NVRTC
chosen, its precompiled header for ``sm_90a`` (the arch ``tune`` compiles for unless told
otherwise; a worker for another makes its own as it starts). Each forked worker then starts with
all of it made, where 15 spawned workers each made it again, at once
(:class:`~tilesearch.workers.IsolatedWorker`).

Made here, the header holds every fork for its 3 s on the H200 host. Made by each worker in a
thread while it lowered its first candidate instead, 15 headers and 15 lowerings at once on 16
cores would each take about twice as long, and on a 2-core machine the first kernel came after
11.2 s against 5.5 s this way.

The compiler is not installed here (:func:`~tilesearch.builder.compiler.install` switches a hook and
a cache folder): each worker installs the one its own environment names when it compiles.
Nothing here may fail the fork server: a failure shows where the worker compiles.
"""

import logging

try:
    import tilelang  # noqa: F401 - before TVM

    from tilesearch.builder import compiler, local  # noqa: F401 - what compile_candidate imports

    if compiler.chosen() == "nvrtc":
        compiler.make_header("sm_90a", background=False)
except Exception as exc:  # noqa: BLE001 - see the module docstring
    logging.getLogger(__name__).debug("warm-up of the fork server failed: %s", exc)
