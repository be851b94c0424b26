"""tilesearch: schedule search for TileLang tile programs on real CUDA GPUs."""

from tilesearch.database import TrialRecord, TuningDatabase
from tilesearch.deploy import export, load
from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.range_tuner import RangeResult, RangeSettings, certify, tune_range
from tilesearch.records import BuildResult, Candidate, Final, RunResult, Status
from tilesearch.revalidate import Revalidation, revalidate
from tilesearch.space import Categorical, IntRange, PowerOfTwo, Space
from tilesearch.target import Target
from tilesearch.trial_table import trials
from tilesearch.tuner import TuneResult, TuneSettings, tune

__version__ = "0.1.0"

__all__ = [
    "BuildResult",
    "Candidate",
    "Categorical",
    "Final",
    "IntRange",
    "Operator",
    "Param",
    "PowerOfTwo",
    "Problem",
    "RangeResult",
    "RangeSettings",
    "Revalidation",
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
    "revalidate",
    "trials",
    "tune",
    "tune_range",
]
