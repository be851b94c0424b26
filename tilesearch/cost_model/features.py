"""Features of a (problem, configuration) pair that a cost model learns from.

Every op gets the knob values themselves (numbers as they are and as log2, categories one-hot
over the op's full space, so that two sub-spaces of one op share their columns) and its numeric
problem parameters. An op can add its own analytic features through :data:`EXTRA`; GEMM's
describe how the tiles fill the GPU (tiles, waves over the SM count, last-wave occupancy, shared
memory and blocks per SM), how much data a tile reuses (arithmetic intensity), the pipeline
(K iterations against stages), the warp layout, the swizzle's L2 footprint and the dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tilesearch.space import Space
from tilesearch.target import Target

FeatureFn = Callable[[Mapping[str, Any], Mapping[str, Any], Target], dict[str, float]]
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536
MAX_BLOCKS_PER_SM = 32


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def knob_features(space: Space, config: Mapping[str, Any]) -> dict[str, float]:
    """Each knob's value (numbers also as log2) or its one-hot over the space's values."""
    out: dict[str, float] = {}
    for knob in space.knobs:
        values = knob.values()
        value = config.get(knob.name)
        if all(_is_number(v) for v in values):
            out[knob.name] = float(value) if _is_number(value) else math.nan
            if all(v > 0 for v in values):
                out[f"log2_{knob.name}"] = _log2(float(value)) if _is_number(value) else math.nan
        else:
            for v in values:
                out[f"{knob.name}={v}"] = float(value == v)
    return out


def problem_features(problem: Mapping[str, Any]) -> dict[str, float]:
    """log2 of every numeric problem parameter (categorical ones are left to the op's features)."""
    return {f"log2_{k}": _log2(float(v)) for k, v in problem.items() if _is_number(v)}


def warp_grid(policy: str, warps: int, block_m: int, block_n: int) -> tuple[int, int]:
    """Warps along M and N for TileLang's warp policies (square: the split whose warp tile is
    closest to square)."""
    if policy == "full_row":
        return warps, 1
    if policy == "full_col":
        return 1, warps
    best = (warps, 1)
    for wm in (d for d in range(1, warps + 1) if warps % d == 0):
        wn = warps // wm
        if block_m % wm or block_n % wn:
            continue
        if abs(block_m / wm - block_n / wn) < abs(block_m / best[0] - block_n / best[1]):
            best = (wm, wn)
    return best


def gemm_features(problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
    """Analytic features of one GEMM configuration on ``target``."""
    m, n, k = problem["m"], problem["n"], problem["k"]
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    stages, threads, panel = config["num_stages"], config["threads"], config["panel_size"]
    esize = 2
    split = config.get("split_k", 1)
    tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / bn)
    tiles = tiles_m * tiles_n * split  # blocks: one per output tile and K slice
    smem = stages * (bm + bn) * bk * esize
    acc = bm * bn / threads
    regs = min(255, acc + 40)
    per_sm = min(
        (target.smem_per_block + 1024) // max(smem, 1),
        MAX_THREADS_PER_SM // threads,
        REGISTERS_PER_SM // int(threads * regs),
        MAX_BLOCKS_PER_SM,
    )
    per_sm = max(per_sm, 1)
    slots = target.num_sms * per_sm
    waves = tiles / slots
    full_waves = math.ceil(waves)
    last = (tiles - (full_waves - 1) * slots) / slots
    k_iters = math.ceil(math.ceil(k / bk) / split)
    warps = threads // 32
    wm, wn = warp_grid(str(config["warp_policy"]), warps, bm, bn)
    wtm, wtn = bm / wm, bn / wn
    if panel:
        rows, cols = min(panel, tiles_m), min(tiles_n, math.ceil(slots / max(min(panel, tiles_m), 1)))
    else:
        rows, cols = math.ceil(min(slots, tiles) / tiles_n), min(slots, tiles_n)
    footprint = (rows * bm + cols * bn) * k * esize
    return {
        "is_bf16": float(problem.get("dtype") == "bfloat16"),
        "nt": float(problem.get("layout") == "nt"),
        "log2_flops": _log2(2.0 * m * n * k),
        "log2_tiles": _log2(tiles),
        "log2_tiles_m": _log2(tiles_m),
        "log2_tiles_n": _log2(tiles_n),
        "waves": waves,
        "full_waves": float(full_waves),
        "last_wave_occupancy": last,
        "wave_efficiency": tiles / (full_waves * slots),
        "first_wave_sm_share": min(tiles, target.num_sms) / target.num_sms,
        "smem_kb": smem / 1024,
        "smem_share": smem / target.smem_per_block,
        "blocks_per_sm": float(per_sm),
        "warps_per_sm": float(per_sm * warps),
        "acc_per_thread": acc,
        "tile_intensity": bm * bn / (bm + bn),
        "tile_aspect": _log2(bm / bn),
        "log2_k_iters": _log2(k_iters),
        "k_iters_per_stage": k_iters / stages,
        "stages_exceed_k": float(stages > k_iters),
        "pad_waste_mn": tiles_m * bm * tiles_n * bn / (m * n) - 1.0,
        "pad_waste_k": k_iters * bk / k - 1.0,
        "warp_tile_m": wtm,
        "warp_tile_n": wtn,
        "warp_tile_intensity": wtm * wtn / (wtm + wtn),
        "swizzle": float(panel > 0),
        "log2_wave_l2_share": _log2(footprint / target.l2_bytes),
        "bytes_per_flop": esize * (1 / bm + 1 / bn) / 2,
    }


EXTRA: dict[str, FeatureFn] = {"gemm": gemm_features}


class Featurizer:
    """Turns configurations of one op into rows of a feature matrix with fixed columns.

    Args:
        op: operator name (selects its :data:`EXTRA` features).
        space: the op's full space: its knobs fix the columns.
        defaults: values of knobs a configuration leaves out (default: the registered op's).
    """

    def __init__(self, op: str, space: Space, defaults: Mapping[str, Any] | None = None) -> None:
        from tilesearch import registry

        self.op = op
        self.space = space
        self.defaults = dict(registry.load(op).defaults if defaults is None else defaults)
        self.extra = EXTRA.get(op)
        self._names: list[str] | None = None

    def row(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
        config = {**self.defaults, **config}
        out = knob_features(self.space, config)
        out.update(problem_features(problem))
        if self.extra is not None:
            out.update(self.extra(problem, config, target))
        return out

    def matrix(self, problem: Mapping[str, Any], configs: Sequence[Mapping[str, Any]], target: Target) -> np.ndarray:
        """Features of ``configs`` of ``problem`` on ``target``, one row each."""
        rows = [self.row(problem, c, target) for c in configs]
        if self._names is None:
            sample = rows[0] if rows else self.row(problem, next(self.space.enumerate()), target)
            self._names = list(sample)
        return np.array([[r.get(name, math.nan) for name in self._names] for r in rows], dtype=np.float32).reshape(
            len(rows), len(self._names)
        )

    @property
    def names(self) -> list[str]:
        return list(self._names or [])
