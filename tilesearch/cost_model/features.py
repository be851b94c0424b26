"""Features of a (problem, configuration) pair that a cost model learns from.

Every op gets the knob values themselves (numbers as they are and as log2, categories one-hot
over the op's full space, so that two sub-spaces of one op share their columns) and its numeric
problem parameters. An op adds its own analytic features, and the prior the model starts from,
through its :meth:`~tilesearch.op.Operator.features` and :meth:`~tilesearch.op.Operator.estimate`
hooks: GEMM's describe how the tiles fill the GPU, how much data a tile reuses, the pipeline and
the warp layout (``search_spaces/gemm_model.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilesearch.op import Operator
from tilesearch.space import Space
from tilesearch.target import Target


def log2_feature(x: float) -> float:
    """log2 of a positive figure; -1 for zero or less (a feature column must stay finite)."""
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
                out[f"log2_{knob.name}"] = log2_feature(float(value)) if _is_number(value) else math.nan
        else:
            for v in values:
                out[f"{knob.name}={v}"] = float(value == v)
    return out


def problem_features(problem: Mapping[str, Any]) -> dict[str, float]:
    """log2 of every numeric problem parameter (categorical ones are left to the op's features)."""
    return {f"log2_{k}": log2_feature(float(v)) for k, v in problem.items() if _is_number(v)}


class Featurizer:
    """Turns configurations of one op into rows of a feature matrix with fixed columns.

    Args:
        op: the operator (or its registered name): its hooks give the analytic features and
            the prior.
        space: the op's full space: its knobs fix the columns.
        defaults: values of knobs a configuration leaves out (default: the op's).
    """

    def __init__(self, op: Operator | str, space: Space, defaults: Mapping[str, Any] | None = None) -> None:
        from tilesearch import registry

        self.op = registry.load(op) if isinstance(op, str) else op
        self.space = space
        self.defaults = dict(self.op.defaults if defaults is None else defaults)
        self._names: list[str] | None = None

    def row(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
        config = {**self.defaults, **config}
        out = knob_features(self.space, config)
        out.update(problem_features(problem))
        out.update(self.op.features(problem, config, target))
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

    def estimate(self, problem: Mapping[str, Any], configs: Sequence[Mapping[str, Any]], target: Target) -> np.ndarray:
        """log2 of the op's analytic throughput estimate of each configuration (0 for all under
        the default flat estimate): the prior that the cost model starts from."""
        return np.array([log2_feature(self.op.estimate(problem, {**self.defaults, **c}, target)) for c in configs])

    @property
    def names(self) -> list[str]:
        return list(self._names or [])
