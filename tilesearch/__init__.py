"""tilesearch: schedule search for TileLang tile programs on real CUDA GPUs."""

from tilesearch.database import TrialRecord, TuningDatabase
from tilesearch.deploy import export, load
from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.range_tuner import RangeResult, RangeSettings, certify, tune_range
from tilesearch.records import BuildResult, Candidate, RunResult, Status
from tilesearch.space import Categorical, IntRange, PowerOfTwo, Space
from tilesearch.target import Target
from tilesearch.tuner import TuneResult, TuneSettings, tune

__version__ = "0.1.0"

__all__ = [
    "BuildResult",
    "Candidate",
    "Categorical",
    "IntRange",
    "Operator",
    "Param",
    "PowerOfTwo",
    "Problem",
    "RangeResult",
    "RangeSettings",
    "RunResult",
    "Space",
    "Status",
    "Target",
    "Tolerance",
    "TrialRecord",
    "TuneResult",
    "TuneSettings",
    "TuningDatabase",
    "certify",
    "export",
    "load",
    "tune",
    "tune_range",
]
