"""A runner that checks and times Python kernels on the CPU, in the same isolated worker as a GPU.

For CI without a GPU: :class:`CpuRunner` is the :class:`~tilesearch.runner.LocalRunner` with its
worker's functions replaced, so a kernel that hangs is killed after the timeout and one that
crashes the process (a segmentation fault) is a ``runtime_error``, by the very code that guards
GPU runs. Its timings are CPU wall times, not GPU measurements: every result is marked replayed.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from tilesearch.records import Candidate, RunResult, Status
from tilesearch.runner.local import LocalRunner
from tilesearch.runner.measure import MeasureSettings, check


class CpuRunner(LocalRunner):
    """Runs an operator whose ``build`` returns a Python callable on CPU tensors."""

    replayed = True
    measure_fn = "tilesearch.testing.cpu:measure"
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
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        kernel(*inputs, *outputs)
        times.append((time.perf_counter() - t0) * 1e3)
    latency = statistics.median(times)
    return RunResult(
        Status.OK,
        latency_ms=latency,
        tflops=op.flops(problem) / (latency * 1e-3) / 1e12,
        rel_err=rel,
        max_err=mx,
        measure_s=time.perf_counter() - start,
        replayed=True,
        extra={"device": "cpu"},
    )
