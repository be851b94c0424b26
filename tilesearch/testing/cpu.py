"""A runner that checks and times Python kernels on the CPU, in the same isolated worker as a GPU.

For CI without a GPU: :class:`CpuRunner` is the :class:`~tilesearch.runner.LocalRunner` with its
worker's functions replaced, so a kernel that hangs is killed after the timeout and one that
crashes the process (a segmentation fault) is a ``runtime_error``, by the very code that guards
GPU runs. Its timings are CPU wall times, not GPU measurements: every result is marked replayed.
"""

from __future__ import annotations

import time
from typing import Any

from tilesearch.records import Candidate, RunResult, Status
from tilesearch.runner.local import LocalRunner
from tilesearch.runner.measure import MeasureSettings, check, figures


class CpuRunner(LocalRunner):
    """Runs an operator whose ``build`` returns a Python callable on CPU tensors."""

    replayed = True
    measure_fn = "tilesearch.testing.cpu:measure"
    together_fn = "tilesearch.testing.cpu:measure_together"
    info_fn = "tilesearch.testing.cpu:device_info"


def device_info() -> dict[str, Any]:
    import torch  # noqa: F401 - the warm-up of a fresh worker, as on a GPU

    from tilesearch import versions
    from tilesearch.target import Target

    info = Target.from_arch("sm_90a", gpu="cpu").to_dict()
    info["versions"] = versions.collect()
    return info


def measure(candidate: Candidate, settings: MeasureSettings) -> RunResult:
    """Checks one candidate against the reference on the CPU, then takes the median of 5 runs."""
    import torch

    from tilesearch.op import Problem
    from tilesearch.space import digest

    start = time.perf_counter()
    op = candidate.load_op()
    problem = Problem(op.name, candidate.problem)
    kernel = op.build(problem, candidate.config, candidate.target)
    generator = torch.Generator().manual_seed(int(digest(candidate.key, settings.seed), 16) % 2**62)
    inputs = op.make_inputs(problem, "cpu", generator)
    outputs = op.make_outputs(problem, "cpu")
    rel, mx, why = check(kernel, inputs, outputs, op.reference(problem, inputs), op.tolerance(problem, candidate.config))
    if why is not None:
        return RunResult(Status.WRONG_RESULT, error=why, rel_err=rel, max_err=mx, replayed=True,
                         measure_s=time.perf_counter() - start)
    found = figures(_wall_ms([lambda: kernel(*inputs, *outputs)], 5)[0], None, settings.seed)
    return RunResult(
        Status.OK,
        tflops=op.flops(problem) / (found["latency_ms"] * 1e-3) / 1e12,
        rel_err=rel,
        max_err=mx,
        measure_s=time.perf_counter() - start,
        replayed=True,
        extra={"device": "cpu"},
        **found,
    )


def _wall_ms(fns: list[Any], rounds: int) -> list[list[float]]:
    """CPU wall milliseconds of each of ``fns`` per round, interleaved as on a GPU."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, samples):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return samples


def measure_together(candidates: list[Candidate], settings: MeasureSettings) -> list[RunResult]:
    """The CPU counterpart of :func:`tilesearch.runner.measure.measure_together`: each candidate
    checked, then all that pass timed interleaved in the same 15 rounds (no baseline: the
    intervals are those of the medians)."""
    import torch

    from tilesearch.op import Problem
    from tilesearch.space import digest

    start = time.perf_counter()
    results: list[RunResult] = []
    fns = []
    for candidate in candidates:
        op = candidate.load_op()
        problem = Problem(op.name, candidate.problem)
        kernel = op.build(problem, candidate.config, candidate.target)
        generator = torch.Generator().manual_seed(int(digest(candidate.key, settings.seed), 16) % 2**62)
        inputs = op.make_inputs(problem, "cpu", generator)
        outputs = op.make_outputs(problem, "cpu")
        rel, mx, why = check(kernel, inputs, outputs, op.reference(problem, inputs),
                             op.tolerance(problem, candidate.config))
        results.append(RunResult(Status.WRONG_RESULT if why else Status.OK, error=why, rel_err=rel, max_err=mx,
                                 replayed=True))
        if why is None:
            fns.append((op.flops(problem), lambda k=kernel, i=inputs, o=outputs: k(*i, *o)))
    samples = iter(_wall_ms([fn for _, fn in fns], 15))
    flops = iter(f for f, _ in fns)
    out = []
    for result in results:
        if result.status != Status.OK:
            out.append(result)
            continue
        found = figures(next(samples), None, settings.seed)
        out.append(RunResult(Status.OK, tflops=next(flops) / (found["latency_ms"] * 1e-3) / 1e12,
                             rel_err=result.rel_err, max_err=result.max_err, measure_s=time.perf_counter() - start,
                             replayed=True, extra={"device": "cpu", "retimed_together": len(fns)}, **found))
    return out
