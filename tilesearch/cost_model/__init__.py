"""Cost models: learn from measured trials which configurations are fast."""

from tilesearch.cost_model.features import EXTRA, Featurizer, gemm_features, knob_features
from tilesearch.cost_model.xgb import XGBRanker, XGBSettings, relevance

__all__ = ["EXTRA", "Featurizer", "XGBRanker", "XGBSettings", "gemm_features", "knob_features", "relevance"]
