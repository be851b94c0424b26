"""An XGBoost ranking model of configurations: which of two configurations is faster.

It is trained on groups (one per problem: the measured trials of this study, and those of other
problems of the same op for transfer) with a ranking objective, so that only the order of
configurations within a problem matters, not the scale of their TFLOP/s; that is what lets
records of one GEMM shape guide the search on another.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class XGBSettings:
    """Training settings.

    Attributes:
        objective: ``rank:pairwise`` or ``rank:ndcg`` (or ``reg:squarederror`` on the labels).
        rounds: boosting rounds.
        max_depth, eta, subsample, colsample: tree settings.
        grades: for ``rank:ndcg``, labels are cut into this many integer grades.
    """

    objective: str = "rank:pairwise"
    rounds: int = 30
    max_depth: int = 4
    eta: float = 0.15
    subsample: float = 0.9
    colsample: float = 0.9
    min_child_weight: float = 1.0
    grades: int = 16
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingGroup:
    """The records of one problem: features ``x``, labels ``y`` (see :func:`relevance`), the
    prior score the trees are added to (``margin``, none: 0) and the group's weight."""

    x: np.ndarray
    y: np.ndarray
    margin: np.ndarray | None = None
    weight: float = 1.0


def relevance(tflops: Sequence[float | None]) -> np.ndarray:
    """Labels of one group: throughput over the group's best, cubed (the top matters most);
    failures (``None``) are 0."""
    values = np.array([t if t is not None and t > 0 else 0.0 for t in tflops], dtype=np.float64)
    best = values.max() if len(values) else 0.0
    return (values / best) ** 3 if best > 0 else values


def labels(records: Sequence[Any]) -> tuple[list[Any], list[float | None]]:
    """The configurations of ``records`` (trial records or dataset rows of one problem) that have
    a result (:func:`tilesearch.records.has_result`), and the figure :func:`relevance` ranks them
    by (:func:`tilesearch.records.speeds`: the ratio to the baseline where every correct one has
    it, else TFLOP/s); ``None`` for a failure, which ranks it last."""
    from tilesearch.records import has_result, speeds

    results = [r for r in records if has_result(r)]
    return [r.config for r in results], speeds(results)


class XGBRanker:
    """Fits groups of (features, relevance) and scores configurations (higher is faster)."""

    def __init__(self, settings: XGBSettings | None = None, seed: int = 0) -> None:
        self.settings = settings or XGBSettings()
        self.seed = seed
        self.booster: Any = None

    def _params(self) -> dict[str, Any]:
        s = self.settings
        params = {
            "objective": s.objective, "max_depth": s.max_depth, "eta": s.eta, "subsample": s.subsample,
            "colsample_bytree": s.colsample, "min_child_weight": s.min_child_weight, "seed": self.seed,
            "nthread": 1, "tree_method": "hist", "verbosity": 0,
        }
        if s.objective.startswith("rank:"):
            params["lambdarank_pair_method"] = "mean"
            params["lambdarank_num_pair_per_sample"] = 8
        if s.objective == "rank:ndcg":
            params["ndcg_exp_gain"] = True
        params.update(s.extra)
        return params

    def fit(self, groups: Sequence[TrainingGroup | tuple[np.ndarray, np.ndarray]]) -> bool:
        """Trains on groups of ``(features, labels)`` (or :class:`TrainingGroup` with a prior
        margin and a weight); groups with fewer than two rows or one label value teach no order
        and are left out. Returns False when nothing was left to learn."""
        import xgboost as xgb

        used = [g if isinstance(g, TrainingGroup) else TrainingGroup(*g) for g in groups]
        used = [g for g in used if len(g.y) >= 2 and np.ptp(g.y) > 0]
        if not used:
            return False
        x = np.concatenate([g.x for g in used])
        y = np.concatenate([g.y for g in used])
        margin = np.concatenate([np.zeros(len(g.y)) if g.margin is None else g.margin for g in used])
        if self.settings.objective == "rank:ndcg":
            y = np.floor(y * (self.settings.grades - 1) + 0.5)
        ranking = self.settings.objective.startswith("rank:")
        rows = np.concatenate([np.full(len(g.y), g.weight) for g in used])
        data = xgb.DMatrix(
            x, label=y, base_margin=margin, nthread=1,
            **({"qid": np.concatenate([np.full(len(g.y), i, dtype=np.uint32) for i, g in enumerate(used)]),
                "weight": np.array([g.weight for g in used])} if ranking else {"weight": rows}),
        )
        self.booster = xgb.train(self._params(), data, num_boost_round=self.settings.rounds)
        return True

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def predict(self, x: np.ndarray, margin: np.ndarray | None = None) -> np.ndarray:
        """Scores of the rows of ``x`` (higher is faster); ``margin`` is the prior the model was
        trained on top of, for the same rows."""
        if self.booster is None:
            raise RuntimeError("the model is not trained")
        if margin is None:
            return self.booster.inplace_predict(x)
        return self.booster.inplace_predict(x, base_margin=margin)

    def save(self) -> str:
        """The trained model as base64 text (XGBoost's UBJSON), to keep with a study."""
        return base64.b64encode(bytes(self.booster.save_raw("ubj"))).decode()

    @classmethod
    def load(cls, text: str, settings: XGBSettings | None = None, seed: int = 0) -> XGBRanker:
        import xgboost as xgb

        model = cls(settings, seed)
        model.booster = xgb.Booster(model_file=bytearray(base64.b64decode(text)))
        return model
