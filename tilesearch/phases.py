"""Where a tuning run's wall time goes: the phases of ``tune``, measured, not estimated.

A tuning run is mostly waiting (on a worker process to start, on the compile pool, on the GPU),
and which wait dominates decides what to make faster. :class:`Phases` adds up the seconds the
tuning process spends in each named phase (``with phases("propose"): ...``) and the seconds the
compile pool and the measuring worker report for work done elsewhere (``phases.add``); ``tune``
returns the totals in :attr:`~tilesearch.tuner.TuneResult.phases`, and ``tune ... verbose=true``
prints them.

Phases of the tuning process are parts of its wall time and do not overlap, but for ``measure``:
the runner measures in a thread of its own while the tuning process records the trial before and
proposes the next ones, so ``propose`` and ``database`` overlap it, and ``wait for measure`` is the
part of it the tuning process spent waiting. Those of the compile pool add up over its worker
processes (``compile`` in 15 processes can exceed the wall time).
``worker:`` phases are the measuring worker's parts of ``measure``: ``time`` for trials timed to
the full precision, ``time (raced)`` for those that stopped once clearly slower than the best so
far (:mod:`tilesearch.runner.measure`). ``spare:`` phases are the runner's fresh worker processes
for the final re-time (:mod:`tilesearch.runner.local`): ``warm-up (background)`` adds up their
starts, which overlap the search, and ``wait`` is the part of ``final re-time`` spent waiting for
one still starting. ``compile re-timed`` compiles, before the final re-time, the configurations
to re-time that this run did not compile (an earlier run's, perhaps on another host). ``final:``
phases are the parts of ``final re-time``: ``process`` adds up the calls of its processes, of
which ``load and check`` (kernels from the cache, checked against the reference) and ``settle and
time`` (the rounds) are parts. ``stop workers`` is the end of ``tune``:
the compile pool and the worker processes asked to exit and waited for. Phases marked
``(background)`` or ``pool:`` get no share of the wall time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

# the phases ``tune`` records, in the order of a run; ``pool:`` ones add up over worker processes
ORDER = (
    "runner start", "study open", "propose", "database", "wait for build", "wait for measure", "measure",
    "compile re-timed", "final re-time", "stop workers",
    "pool: compile", "pool: compiler processes", "worker: load", "worker: check", "worker: time",
    "worker: time (raced)", "worker: time: throttled, timed again", "spare: warm-up (background)", "spare: wait",
    "final: process", "final: load and check", "final: settle and time",
)


def process_age() -> float | None:
    """Seconds since this process started, from Linux's ``/proc`` (10 ms ticks); ``None`` elsewhere.

    Why: ``tune``'s clock starts once the command has imported its modules, checked its input and
    opened the storage, about 1 s on the CPU machine, which the user waits through as well; the
    command line adds it to the time to the first measured trial, so that the figure it prints is
    the one a user starting the command sees."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, after the command's name
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Phases:
    """Seconds per named phase, the moment of the first result, and how long the process ran before
    (:func:`process_age`)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.before_s = process_age()
        self.seconds: dict[str, float] = {}
        self.first_result_s: float | None = None

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def result_arrived(self) -> None:
        if self.first_result_s is None:
            self.first_result_s = time.perf_counter() - self.start


# the tuning process's own phases that do not overlap one another (``measure`` runs beside them):
# together, most of its wall time
SEQUENTIAL = tuple(name for name in ORDER[:ORDER.index("stop workers") + 1] if name != "measure")


def largest(seconds: dict[str, float], n: int = 3) -> str:
    """The ``n`` longest of :data:`SEQUENTIAL`, ``"wait for build 30.1 s, ..."``: a line for a log
    that runs many searches (a range's), where a table a search would drown it."""
    top = sorted((name for name in SEQUENTIAL if seconds.get(name, 0.0) >= 0.05), key=lambda name: -seconds[name])
    return ", ".join(f"{name} {seconds[name]:.1f} s" for name in top[:n])


def table(seconds: dict[str, float], wall_s: float) -> str:
    """The phases as lines ``name  seconds  share of the wall time``, in the order of a run."""
    names = [n for n in ORDER if n in seconds] + sorted(set(seconds) - set(ORDER))
    lines = ["phase                         seconds   of wall"]
    for name in names:
        background = name.startswith("pool:") or name.endswith("(background)")
        share = f"{100 * seconds[name] / wall_s:6.0f}%" if wall_s and not background else "      -"
        lines.append(f"{name:28} {seconds[name]:8.2f}   {share}")
    return "\n".join(lines)
