"""The command line every experiment script shares: ``python experiments/X.py key=value ...``.

The keys are :class:`~tilesearch.experiment.Experiment` fields (``trials=8``,
``strategies=tpe,xgb``, ``seeds=0,1``, ``peers=torch,triton``, ``top=5``, ``out=DIR``,
``runner=replay:FILE``), the same words as ``tilesearch tune``; ``replot=FILE`` draws the
plot and table of a recorded run without measuring anything. Bad input exits with code 2 and
one line.
"""

from __future__ import annotations

import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from tilesearch.experiment import output
from tilesearch.experiment.config import Experiment, ExperimentError
from tilesearch.experiment.run import run

_LISTS = {"strategies": str, "seeds": int, "peers": str}
_SCALARS = {"trials": int, "top": int, "out": str, "runner": str, "title": str}


def configure(experiment: Experiment, argv: list[str]) -> Experiment:
    """``experiment`` with the ``key=value`` overrides of ``argv``."""
    changes: dict[str, Any] = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            raise ExperimentError(f"{arg!r} is not key=value; keys: {', '.join([*_LISTS, *_SCALARS, 'replot'])}")
        try:
            if key in _LISTS:
                changes[key] = tuple(_LISTS[key](v) for v in value.split(",") if v)
            elif key in _SCALARS:
                changes[key] = _SCALARS[key](value)
            else:
                raise ExperimentError(f"unknown key {key!r}; keys: {', '.join([*_LISTS, *_SCALARS, 'replot'])}")
        except ValueError as e:
            raise ExperimentError(f"{key}={value}: {e}") from None
    assert {f.name for f in fields(Experiment)} >= set(changes)
    return replace(experiment, **changes)


def main(experiment: Experiment, argv: list[str] | None = None) -> int:
    """Runs ``experiment`` with the command line's overrides (``out`` defaults to ``$OUT``), or
    redraws a recorded run (``replot=FILE``). Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    replot = [a.partition("=")[2] for a in argv if a.startswith("replot=")]
    try:
        if replot:
            result = output.load(replot[0])
            output.plot(result, Path(replot[0]).with_suffix(".png"))
            print(output.table(result))
            return 0
        if os.environ.get("OUT") and not any(a.startswith("out=") for a in argv):
            argv.append(f"out={os.environ['OUT']}")
        experiment = configure(experiment, argv)
        from tilesearch.experiment.peers import resolve

        [resolve(p) for p in experiment.peers]
    except ExperimentError as e:
        print(f"{Path(sys.argv[0]).name}: {e}", file=sys.stderr)
        return 2
    run(experiment)
    return 0
