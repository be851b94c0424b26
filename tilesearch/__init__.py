"""tilesearch: schedule search for TileLang tile programs on real CUDA GPUs.

Public names are imported on first use (PEP 562), so that ``import tilesearch.cli`` costs
nothing: the command line installs its signal handlers before Optuna and TileLang are imported,
and an interrupt during those imports ends in the same one line as any other.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_WHERE = {
    "TrialRecord": "tilesearch.database",
    "TuningDatabase": "tilesearch.database",
    "export": "tilesearch.deploy",
    "load": "tilesearch.deploy",
    "Operator": "tilesearch.op",
    "Param": "tilesearch.op",
    "Problem": "tilesearch.op",
    "Tolerance": "tilesearch.op",
    "RangeResult": "tilesearch.range_tuner",
    "RangeSettings": "tilesearch.range_tuner",
    "certify": "tilesearch.range_tuner",
    "tune_range": "tilesearch.range_tuner",
    "BuildResult": "tilesearch.records",
    "Final": "tilesearch.records",
    "Candidate": "tilesearch.records",
    "RunResult": "tilesearch.records",
    "Status": "tilesearch.records",
    "Categorical": "tilesearch.space",
    "IntRange": "tilesearch.space",
    "PowerOfTwo": "tilesearch.space",
    "Space": "tilesearch.space",
    "Revalidation": "tilesearch.revalidate",
    "revalidate": "tilesearch.revalidate",
    "Target": "tilesearch.target",
    "trials": "tilesearch.trial_table",
    "TilesearchError": "tilesearch.errors",
    "TuneResult": "tilesearch.tuner",
    "TuneSettings": "tilesearch.tuner",
    "tune": "tilesearch.tuner",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'tilesearch' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
