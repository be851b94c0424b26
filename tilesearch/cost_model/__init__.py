"""Cost models: learn from measured trials which configurations are fast."""

from tilesearch.cost_model.features import (
    ESTIMATE,
    EXTRA,
    Featurizer,
    gemm_estimate,
    gemm_features,
    knob_features,
)
from tilesearch.cost_model.xgb import TrainingGroup, XGBRanker, XGBSettings, relevance

__all__ = [
    "ESTIMATE", "EXTRA", "Featurizer", "TrainingGroup", "XGBRanker", "XGBSettings", "gemm_estimate", "gemm_features",
    "knob_features", "relevance",
]
