"""Cost models: learn from measured trials which configurations are fast."""

from tilesearch.cost_model.features import Featurizer, knob_features, log2_feature
from tilesearch.cost_model.xgb import TrainingGroup, XGBRanker, XGBSettings, relevance

__all__ = [
    "Featurizer", "TrainingGroup", "XGBRanker", "XGBSettings", "knob_features", "log2_feature", "relevance",
]
