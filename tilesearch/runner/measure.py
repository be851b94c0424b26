"""What runs inside a runner's GPU worker: check a kernel against the reference, then time it.

Method: fresh random inputs per candidate; outputs poisoned with NaN before the run, so an
unwritten element fails; errors against a float64 reference; then warm-up and a median over many
runs timed with CUDA events, L2 flushed before every run, the op's baseline timed interleaved with
the kernel on the same inputs so that clock drift cancels in their ratio.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from tilesearch.records import Candidate, RunResult, Status

_FLUSH: dict[int, Any] = {}


@dataclass(frozen=True)
class MeasureSettings:
    """How a runner checks and times a candidate.

    Attributes:
        warmup_ms: GPU time spent warming up before timing.
        rep_ms: GPU time aimed for in the timed runs (bounded by ``min_reps`` and ``max_reps``).
        baseline: time the op's baseline beside each candidate.
        flush_l2: overwrite a buffer twice the L2's size before each timed run.
        seed: mixed with the candidate's key to seed its inputs.
    """

    warmup_ms: float = 25.0
    rep_ms: float = 200.0
    min_reps: int = 10
    max_reps: int = 300
    baseline: bool = True
    flush_l2: bool = True
    seed: int = 0


def device_info() -> dict[str, Any]:
    """The worker's GPU as a :class:`~tilesearch.target.Target` dict, plus software versions."""

    import tilelang  # noqa: F401 - also the warm-up of a fresh worker: the first measure should not pay for it

    from tilesearch import target, versions

    info = target.detect().to_dict()
    info["versions"] = versions.collect(torch_cuda=True)
    return info


def _poison(tensor: Any) -> None:
    import torch

    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).max)


def check(kernel: Any, inputs: Any, outputs: Any, references: Any, tol: Any) -> tuple[float, float, str | None]:
    """Runs ``kernel(*inputs, *outputs)`` once on outputs poisoned first (so an unwritten element
    fails), then :func:`compare` s them with ``references``."""
    for out in outputs:
        _poison(out)
    kernel(*inputs, *outputs)
    if any(out.is_cuda for out in outputs):
        import torch

        torch.cuda.synchronize()
    return compare(outputs, references, tol)


def compare(outputs: Any, references: Any, tol: Any) -> tuple[float, float, str | None]:
    """Worst relative Frobenius and max errors over the outputs, and why they fail, if they do."""
    import torch

    worst_fro, worst_max, why = 0.0, 0.0, None
    for i, (out, ref) in enumerate(zip(outputs, references)):
        got = out.to(torch.float64)
        ref = ref.to(device=got.device, dtype=torch.float64)
        if got.shape != ref.shape:
            return float("inf"), float("inf"), f"output {i} has shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
        bad = (~torch.isfinite(got)).sum().item()
        if bad:
            return float("inf"), float("inf"), f"output {i}: {bad} elements are NaN/inf (unwritten or overflowed)"
        diff = got - ref
        tiny = torch.finfo(torch.float64).tiny
        fro = (diff.norm() / max(ref.norm().item(), tiny)).item()
        mx = (diff.abs().max() / max(ref.abs().max().item(), tiny)).item()
        worst_fro, worst_max = max(worst_fro, fro), max(worst_max, mx)
        if why is None and (fro > tol.rel_fro or mx > tol.max_rel):
            why = (
                f"output {i}: relative error {fro:.3g} (tolerance {tol.rel_fro:.3g}), "
                f"max error {mx:.3g} (tolerance {tol.max_rel:.3g})"
            )
    return worst_fro, worst_max, why


def bench(fns: list[Any], settings: MeasureSettings, l2_bytes: int) -> list[float]:
    """Median milliseconds of each of ``fns``, timed interleaved with CUDA events."""
    import torch

    flush = None
    if settings.flush_l2:
        size = max(2 * l2_bytes, 64 * 2**20)
        flush = _FLUSH.get(size)
        if flush is None:
            flush = _FLUSH[size] = torch.empty(size, dtype=torch.int8, device="cuda")

    def timed_round(events: list[Any]) -> None:
        for fn, (start, end) in zip(fns, events):
            if flush is not None:
                flush.zero_()
            start.record()
            fn()
            end.record()

    def new_events() -> list[Any]:
        return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns]

    probe = new_events()
    timed_round(probe)  # first call: module load, allocations
    torch.cuda.synchronize()
    probe = [new_events() for _ in range(3)]
    for events in probe:
        timed_round(events)
    torch.cuda.synchronize()
    per_round = sum(s.elapsed_time(e) for events in probe for s, e in events) / 3
    per_round = max(per_round, 1e-3)
    for _ in range(int(settings.warmup_ms / per_round)):
        timed_round(new_events())
    reps = int(min(max(settings.rep_ms / per_round, settings.min_reps), settings.max_reps))
    rounds = [new_events() for _ in range(reps)]
    for events in rounds:
        timed_round(events)
    torch.cuda.synchronize()
    return [statistics.median(events[i][0].elapsed_time(events[i][1]) for events in rounds) for i in range(len(fns))]


def measure(candidate: Candidate, settings: MeasureSettings) -> RunResult:
    """Builds (from TileLang's cache), checks and times one candidate on GPU 0."""
    import torch

    from tilesearch.op import Problem
    from tilesearch.space import digest

    start = time.perf_counter()
    op = candidate.load_op()
    problem = Problem(op.name, candidate.problem)
    kernel = op.build(problem, candidate.config, candidate.target)

    device = torch.device("cuda")
    generator = torch.Generator(device=device)
    generator.manual_seed(int(digest(candidate.key, settings.seed), 16) % 2**62)
    inputs = op.make_inputs(problem, device, generator)
    outputs = op.make_outputs(problem, device)
    rel, mx, why = check(kernel, inputs, outputs, op.reference(problem, inputs), op.tolerance(problem, candidate.config))
    if why is not None:
        return RunResult(Status.WRONG_RESULT, error=why, rel_err=rel, max_err=mx, measure_s=time.perf_counter() - start)

    fns = [lambda: kernel(*inputs, *outputs)]
    base = op.baseline(problem, inputs) if settings.baseline else None
    if base is not None:
        fns.append(base)
    times = bench(fns, settings, candidate.target.l2_bytes)
    latency = times[0]
    baseline_ms = times[1] if base is not None else None
    return RunResult(
        Status.OK,
        latency_ms=latency,
        tflops=op.flops(problem) / (latency * 1e-3) / 1e12,
        baseline_ms=baseline_ms,
        speedup=(baseline_ms / latency) if baseline_ms else None,
        rel_err=rel,
        max_err=mx,
        measure_s=time.perf_counter() - start,
    )
