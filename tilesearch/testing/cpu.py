"""A runner that checks and times Python kernels on the CPU, in the same isolated worker process as a GPU.

For CI without a GPU: :class:`CpuRunner` is the :class:`~tilesearch.runner.LocalRunner` with its
worker's functions replaced, so a kernel that hangs is killed after the timeout and one that
crashes the process (a segmentation fault) is a ``runtime_error``, by the very code that guards
GPU runs. Its timings are CPU wall times, not GPU measurements: every result is marked replayed.
A search trial races against the incumbent by the GPU's rule (:func:`tilesearch.runner.measure.racer`,
on the latencies: there is no baseline here), with a look at :data:`LOOK` of its 5 rounds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tilesearch.op import Problem
from tilesearch.records import Candidate, Incumbent, RunResult, Status
from tilesearch.runner.local import LocalRunner
from tilesearch.runner.measure import (
    MeasureSettings,
    adaptive,
    check,
    checked_peers,
    figures,
    racer,
    together_key,
)
from tilesearch.space import Categorical, Config, Space
from tilesearch.target import Target
from tilesearch.testing.faulty import FaultyCpuOp

LOOK = 3  # rounds of a racing trial's first look
LOG = "TILESEARCH_CPU_LOG"  # environment variable: the file the worker functions log their calls to
WARM_GATE = "TILESEARCH_CPU_WARM_GATE"  # environment variable: a file warm_up waits for


class CpuRunner(LocalRunner):
    """Runs an operator whose ``build`` returns a Python callable on CPU tensors.

    ``log``: a file that gets one line per call in a worker process, ``<what> <pid>`` (``info``,
    ``measure``, ``together``), appended atomically, so that tests can tell which process warmed
    up, measured, was prepared for a re-time and re-timed, and in which order (``prepare``, then
    ``ready`` where a re-time found its candidates prepared)."""

    replayed = True
    measure_fn = "tilesearch.testing.cpu:measure"
    together_fn = "tilesearch.testing.cpu:measure_together"
    prepare_fn = "tilesearch.testing.cpu:prepare_together"
    info_fn = "tilesearch.testing.cpu:device_info"
    facts_fn = "tilesearch.testing.cpu:device_facts"
    warm_fn = "tilesearch.testing.cpu:warm_up"
    driver_fn = None  # the worker reports the facts; tests opt in to a quick start (driver_facts)

    def __init__(self, *args: Any, log: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if log:
            self.env[LOG] = log  # for the workers started from now on (spares)
            self._worker.env[LOG] = log  # and the measuring one, not started yet


def _log(what: str) -> None:
    path = os.environ.get(LOG)
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{what} {os.getpid()}\n".encode())
        finally:
            os.close(fd)


def device_info() -> dict[str, Any]:
    warm_up()
    return device_facts()


def device_facts() -> dict[str, Any]:
    from tilesearch import versions

    _log("info")
    info = Target.from_arch("sm_90a", gpu="cpu").to_dict()
    info["versions"] = versions.collect()
    return info


def driver_facts(env: dict[str, str]) -> dict[str, Any]:
    """What :func:`device_facts` reports, read in the tuning process: the CPU runner's stand-in
    for :func:`tilesearch.runner.driver.facts`, for a test of the quick start."""
    from tilesearch import versions

    info = Target.from_arch("sm_90a", gpu="cpu").to_dict()
    info["versions"] = versions.collect()
    return info


def warm_up() -> None:
    """The imports of a fresh worker, as on a GPU: torch, and TileLang with this package's compiler
    and library hooks, which a candidate's build installs (:meth:`Candidate.build`), so that a
    first measure's time limit is not spent importing (3-8 s on a busy 2-core machine: a spare's
    first measure was killed at 8 s there); with :data:`WARM_GATE` set, it waits until that file
    exists, so that a test can hold the warm-up open."""
    import torch  # noqa: F401

    from tilesearch.builder import compiler, library

    compiler.install()
    library.install()

    gate = os.environ.get(WARM_GATE)
    while gate and not os.path.exists(gate):
        time.sleep(0.01)
    _log("warm")


def measure(candidate: Candidate, settings: MeasureSettings, incumbent: Incumbent | None = None) -> RunResult:
    """Checks one candidate against the reference on the CPU, then takes the median of 5 runs,
    or of the first :data:`LOOK` if they race clearly behind ``incumbent``."""
    _log("measure")
    return _checked_and_timed([candidate], settings, rounds=5, extra={"device": "cpu"}, incumbent=incumbent)[0]


_PREPARED: list[tuple[Any, ...]] = []  # what prepare_together was given, for the next measure_together


def prepare_together(candidates: list[Candidate], settings: MeasureSettings, peers: Sequence[Any] = ()) -> dict[str, float]:
    """The CPU counterpart of :func:`tilesearch.runner.measure.prepare_together`, for the runner's
    order of calls alone: it logs ``prepare`` and notes what it was given (:func:`together_key`), and
    :func:`measure_together` logs ``ready`` where it is given the same; it still checks them then."""
    _log("prepare")
    _PREPARED[:] = [together_key(candidates, settings, peers)]
    return {"load and check": 0.0}


def measure_together(candidates: list[Candidate], settings: MeasureSettings, peers: Sequence[Any] = ()) -> list[RunResult]:
    """The CPU counterpart of :func:`tilesearch.runner.measure.measure_together`: each candidate
    and each peer checked, then all that pass timed interleaved in the same 15 rounds (no
    baseline: the intervals are those of the medians)."""
    if _PREPARED == [together_key(candidates, settings, peers)]:
        _log("ready")
    _PREPARED.clear()
    _log("together")
    return _checked_and_timed(candidates, settings, rounds=15, peers=peers,
                              extra={"device": "cpu", "retimed_together": True})


def _wall_ms(fns: list[Any], rounds: int) -> list[list[float]]:
    """CPU wall milliseconds of each of ``fns`` per round, interleaved as on a GPU."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, samples):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return samples


def _checked_and_timed(candidates: list[Candidate], settings: MeasureSettings, *, rounds: int,
                       extra: dict[str, Any], peers: Any = (), incumbent: Incumbent | None = None) -> list[RunResult]:
    """Each candidate checked against its reference, and each peer against the first one's, then
    those that pass timed interleaved (raced against ``incumbent``, if one is given)."""
    import torch

    from tilesearch.space import digest

    start = time.perf_counter()
    results: list[RunResult] = []
    fns = []
    for candidate in candidates:
        op = candidate.load_op()
        problem = Problem(op.name, candidate.problem)
        kernel = candidate.build(op)
        generator = torch.Generator().manual_seed(int(digest(candidate.key, settings.seed), 16) % 2**62)
        inputs = op.make_inputs(problem, "cpu", generator)
        outputs = op.make_outputs(problem, "cpu")
        rel, mx, why = check(kernel, inputs, outputs, op.reference(problem, inputs),
                             op.tolerance(problem, candidate.config))
        results.append(RunResult(status=Status.WRONG_RESULT if why else Status.OK, error=why, rel_err=rel, max_err=mx,
                                 replayed=True, measure_s=time.perf_counter() - start))
        if why is None:
            fns.append((op.flops(problem), lambda k=kernel, i=inputs, o=outputs: k(*i, *o)))
    if peers:
        first = candidates[0]
        op = first.load_op()
        problem = Problem(op.name, first.problem)
        generator = torch.Generator().manual_seed(int(digest(first.key, settings.seed), 16) % 2**62)
        inputs = op.make_inputs(problem, "cpu", generator)
        made = checked_peers(peers, op, problem, inputs, first.target, op.reference(problem, inputs),
                             op.tolerance(problem, first.config))
        for result, fn in made:
            results.append(replace(result, replayed=True))
            if fn is not None:
                fns.append((op.flops(problem), fn))
    if "retimed_together" in extra:  # how many were timed in the same rounds, as on a GPU
        extra = {**extra, "retimed_together": len(fns)}
    race = racer(incumbent, settings, baseline=False)
    timed_fns = [fn for _, fn in fns]
    timing = time.perf_counter()
    samples = iter(adaptive(lambda n: _wall_ms(timed_fns, n), first=rounds, cap=rounds, enough=lambda _: True,
                            look=LOOK, race=race) if timed_fns else [])
    phases = {"load and check": timing - start, "settle and time": time.perf_counter() - timing}
    if race is not None:
        extra = {**extra, **race.record()}
    flops = iter(f for f, _ in fns)
    out = []
    for result in results:
        if result.status != Status.OK:
            out.append(result)
            continue
        timed = next(samples)
        found = figures(timed, None, settings.seed)
        # pooled over processes, as on a GPU
        rounds_kept = {"samples": timed, "phases": phases} if "retimed_together" in extra else {}
        out.append(RunResult(status=Status.OK, tflops=next(flops) / (found["latency_ms"] * 1e-3) / 1e12,
                             rel_err=result.rel_err, max_err=result.max_err, measure_s=time.perf_counter() - start,
                             replayed=True, extra={**result.extra, **extra, **rounds_kept}, **found))
    return out


def doubling_peer(op: Any, problem: Any, inputs: Any, target: Any, offset: float = 1.0) -> Any:
    """A peer of :class:`~tilesearch.testing.faulty.FaultyCpuOp` (``y = 2x + 1``) in plain torch,
    for tests of the re-time with peers; another ``offset`` makes it compute wrong results."""
    (x,) = inputs
    return lambda: x * 2 + offset


SLEEPY_CPU_OP = "tilesearch.testing.cpu:SleepyCpuOp"


class SleepyCpuOp(FaultyCpuOp):
    """``y = 2x + 1`` whose kernel first sleeps ``sleep_ms`` milliseconds (its one knob besides
    ``copy``, which changes nothing): configurations of known, steady speeds, for tests of racing
    and of the spare workers. ``n`` may be a range (a range tuned on the CPU)."""

    name = "sleepy_cpu"
    runtime_params = ("n",)

    def space(self, problem: Problem, target: Target) -> Space:
        return Space([Categorical("sleep_ms", (10, 200)), Categorical("copy", ("a", "b"))])

    def build(self, problem: Problem, config: Config, target: Target, runtime: tuple[str, ...] = ()) -> Any:
        """The kernel serves any ``n`` already: ``runtime`` (a range's sizes) changes nothing."""
        seconds = config["sleep_ms"] / 1e3

        def kernel(x: Any, y: Any) -> None:
            time.sleep(seconds)
            y.copy_(x * 2 + 1)

        return kernel
