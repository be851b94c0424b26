"""A runner that invents latencies from a formula, for tests of the tuning loop without a GPU.

Its numbers are not measurements: every result it returns says ``synthetic`` in ``extra`` and
the runner reports itself as replayed, so nothing it produces can pass for a measurement.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from tilesearch.records import Candidate, Incumbent, RunResult, Status
from tilesearch.runner.base import Runner
from tilesearch.runner.peer import Peer, untimed
from tilesearch.space import digest
from tilesearch.target import Target


def default_latency(config: dict[str, Any]) -> float:
    """A smooth made-up cost with a unique optimum and a little hash noise."""
    cost = 1.0
    for name, value in sorted(config.items()):
        if isinstance(value, int) and value > 0:
            cost += 0.1 * (math.log2(value) - 6) ** 2
        else:
            cost += 0.05 * (int(digest(name, value), 16) % 3)
    return cost + (int(digest(config), 16) % 1000) / 1e5


class SyntheticRunner(Runner):
    """Returns ``latency(config)`` for each candidate; counts the candidates it was asked about.

    Args:
        latency: config -> milliseconds; return ``None`` to report a wrong result.
        target: what :meth:`start` reports.
        delay: seconds each run takes (to widen races between processes in tests).
        log: a file that gets one line per run, ``<key> <pid>``, appended atomically, so that
            tests can count what several processes measured.
    """

    replayed = True

    def __init__(
        self,
        latency: Callable[[dict[str, Any]], float | None] = default_latency,
        target: Target | None = None,
        delay: float = 0.0,
        log: str | None = None,
    ) -> None:
        self.latency = latency
        self.target = target or Target.from_arch("sm_90a", gpu="synthetic")
        self.delay = delay
        self.log = log
        self.calls: list[Candidate] = []

    def start(self) -> Target:
        return self.target

    def retime(self, candidates: Sequence[Candidate], peers: Sequence[Peer] = ()) -> list[RunResult]:
        """The formula's figures again, not counted in ``calls`` (which tests read as the
        configurations the search measured) nor logged; the formula knows no peers."""
        return [self._result(c) for c in candidates] + untimed(peers, "synthetic: no peers")

    def run(self, candidate: Candidate, incumbent: Incumbent | None = None) -> RunResult:
        """The formula's figures (made up: nothing races)."""
        self.calls.append(candidate)
        if self.log:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{candidate.key} {os.getpid()}\n".encode())
            finally:
                os.close(fd)
        if self.delay:
            time.sleep(self.delay)
        return self._result(candidate)

    def _result(self, candidate: Candidate) -> RunResult:
        ms = self.latency(candidate.config)
        if ms is None:
            return RunResult(Status.WRONG_RESULT, error="synthetic wrong result", replayed=True)
        return RunResult(Status.OK, latency_ms=ms, tflops=1.0 / ms, replayed=True, extra={"synthetic": True})


MODELLED = ("block_m", "block_n", "block_k", "num_stages", "threads", "panel_size", "warp_policy", "split_k",
            "persistent", "epilogue", "tma", "warp_specialize")


def gemm_latency(problem: dict[str, Any], config: dict[str, Any], target: Target) -> float | None:
    """A made-up GEMM cost with the shape of the real one (wave quantisation, tile intensity,
    pipeline depth, swizzle, a little hash noise), for developing strategies without data.
    The knobs of the full space (split-K, persistent, epilogue, TMA, warp specialisation) count
    where a configuration has them; at their defaults (or absent, as in the 7-knob sub-space)
    they change nothing. ``None`` stands for a configuration that fails (about 2% of them,
    chosen by hash)."""
    c, p = config, problem
    # the hash noise is drawn from the knobs modelled here, so that a knob added to the op later
    # (GEMM's swap_ab) leaves the made-up landscape of every earlier configuration as it was
    c = {k: v for k, v in config.items() if k in MODELLED}
    if int(digest("fail", c), 16) % 50 == 0:
        return None
    split = c.get("split_k", 1)
    tiles = math.ceil(p["m"] / c["block_m"]) * math.ceil(p["n"] / c["block_n"]) * split
    smem = c["num_stages"] * (c["block_m"] + c["block_n"]) * c["block_k"] * 2
    per_sm = max(1, min(target.smem_per_block // max(smem, 1), 2048 // c["threads"]))
    slots = target.num_sms * per_sm
    wave_eff = tiles / (math.ceil(tiles / slots) * slots)
    intensity = c["block_m"] * c["block_n"] / (c["block_m"] + c["block_n"])
    tile_eff = intensity / (intensity + 24.0)
    k_iters = math.ceil(p["k"] / split / c["block_k"])
    pipe_eff = 1.0 - 0.35 / c["num_stages"] ** 1.5 - (0.15 if c["num_stages"] > k_iters else 0.0)
    fit = {"square": 1.0, "full_row": 0.97 if c["block_m"] >= c["block_n"] else 0.9,
           "full_col": 0.97 if c["block_n"] >= c["block_m"] else 0.9}[c["warp_policy"]]
    threads_eff = 1.0 if (c["threads"] == 256) == (c["block_m"] * c["block_n"] >= 128 * 128) else 0.93
    swizzle = 1.0 if c["panel_size"] or tiles < 2 * target.num_sms else 0.94
    noise = 1.0 + ((int(digest(c, p), 16) % 1000) / 1000 - 0.5) * 0.03
    extra = (1.0 - 0.05 * math.log2(split)) * (0.92 if c.get("tma", True) is False else 1.0)
    extra *= {"on": 1.0, "role_based": 0.98, "off": 0.93}.get(c.get("warp_specialize", "on"), 1.0)
    if c.get("persistent"):
        extra *= 1.03 if tiles > slots else 0.96
    if c.get("epilogue", "direct") != "direct":
        extra *= 1.01 if c["block_m"] * c["block_n"] >= 128 * 128 else 0.98
    tflops = 700.0 * wave_eff * tile_eff * pipe_eff * fit * threads_eff * swizzle * extra / noise
    return 2.0 * p["m"] * p["n"] * p["k"] / (tflops * 1e12) * 1e3


def synthetic_dataset(path: Any, problem: dict[str, Any], knobs: dict[str, Any], *, op: str = "gemm") -> Any:
    """Writes a dataset of :func:`gemm_latency` figures for ``problem`` over the sub-space
    ``knobs`` of ``op``'s space. Its header says SYNTHETIC and its GPU is ``synthetic``: never
    commit one as data."""
    from tilesearch import dataset, registry

    operator = registry.load(op)
    prob = operator.problem(**problem)
    target = Target.from_arch("sm_90a", gpu="synthetic")
    space = dataset.sweep(operator.space(prob, target), knobs)
    rows = []
    for config in space.enumerate():
        ms = gemm_latency(prob.to_dict(), config, target)
        compile_s = 3.0 + (int(digest("compile", config), 16) % 200) / 100
        if ms is None:
            rows.append(dataset.Row(config, "compile_error", error="synthetic failure", compile_s=compile_s))
        else:
            rows.append(dataset.Row(config, "ok", latency_ms=ms, tflops=operator.flops(prob) / ms / 1e9,
                                    compile_s=compile_s, measure_s=0.8))
    meta = dataset.header(
        op=op, problem=prob.to_dict(), problem_key=prob.key, target=target.to_dict(), knobs=knobs,
        valid_configs=len(rows), versions={}, date="synthetic", commit="synthetic",
        notes="SYNTHETIC: made-up figures from tilesearch.testing.synthetic.gemm_latency, not measurements",
    )
    return dataset.write(path, meta, rows)


def tune_gemm(problem: dict[str, Any], *, strategy: Any, trials: int, seed: int = 0, workers: int = 15,
              storage: str = ":memory:", **settings: Any) -> tuple[Any, list[Candidate]]:
    """``tune`` of the GEMM op at ``problem`` against :func:`gemm_latency` on the CPU: a null
    builder "compiles" at once with the pipeline of ``workers`` compile workers, no final
    re-time, warnings silenced. Returns the result and the candidates the runner was asked about."""
    import warnings

    from tilesearch import registry, tune
    from tilesearch.builder import NullBuilder

    target = Target.from_arch("sm_90a", gpu="synthetic")
    op = registry.load("gemm")
    prob = op.problem(**problem)
    runner = SyntheticRunner(lambda c: gemm_latency(prob.to_dict(), c, target), target=target)
    builder = NullBuilder()
    builder.workers = workers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune("gemm", prob, strategy=strategy, runner=runner, builder=builder, storage=storage, trials=trials,
                      seed=seed, progress=False, **{"retime": 0, **settings})
    return result, runner.calls
