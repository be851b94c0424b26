"""GPU checks that tests of hand-written kernel programs share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def failures_against_float64(make: Callable[[str, Any], Any], names: Iterable[str], timeout: float = 30.0) -> list:
    """Builds ``make(name, target)`` (a :class:`~tilesearch.records.Candidate`) for every name,
    all at once in the compile pool, then checks each on this machine's GPU against the float64
    reference; returns ``(name, status, error)`` of each that did not pass. ``timeout`` bounds
    one check: a fault in a pipeline's barriers hangs its kernel, and a correct one checks and
    times in about 2 s."""
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Status
    from tilesearch.runner import LocalRunner

    runner = LocalRunner(timeout=timeout)
    failures = []
    try:
        target = runner.start()
        with LocalBuilder(timeout=900) as builder:
            futures = {name: builder.submit(make(name, target)) for name in names}
            for name, future in futures.items():
                build = future.result()
                if not build.ok:
                    failures.append((name, "build", build.error))
                    continue
                result = runner.run(build.candidate)
                if result.status != Status.OK:
                    failures.append((name, result.status, result.error))
    finally:
        runner.close()
    return failures
