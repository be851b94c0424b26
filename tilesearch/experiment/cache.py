"""An empty TileLang kernel cache for the length of one measured step.

Experiments that time compiling (or must compile every kernel) point ``TILELANG_CACHE_DIR`` at an
empty folder; the compile pool's worker processes read it as they start, and restart. The folder
is not a result: left in the temporary directory, two were added by every CI run of
``compile_time`` alone (44 on one machine). So it goes when the step ends, and the variable is
restored for what follows.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

VARIABLE = "TILELANG_CACHE_DIR"


@contextmanager
def empty_tilelang_cache(name: str) -> Iterator[str]:
    """Sets ``TILELANG_CACHE_DIR`` to a new empty folder (``name`` in its name) and yields it;
    removes it and restores the variable afterwards."""
    before = os.environ.get(VARIABLE)
    with tempfile.TemporaryDirectory(prefix=f"tilelang-cache-{name}-") as folder:
        os.environ[VARIABLE] = folder
        try:
            yield folder
        finally:
            if before is None:
                os.environ.pop(VARIABLE, None)
            else:
                os.environ[VARIABLE] = before
