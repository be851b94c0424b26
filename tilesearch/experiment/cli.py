"""The command line every experiment script shares: ``python experiments/X.py key=value ...``.

The keys are :class:`~tilesearch.experiment.Experiment` fields (``trials=8``,
``strategies=tpe,xgb``, ``seeds=0,1``, ``peers=torch,triton``, ``top=5``, ``out=DIR``,
``runner=replay:FILE``), the same words as ``tilesearch tune``; ``--trials 8`` is the same as
``trials=8``. Any other key is a problem parameter set on every problem (``dtype=float16``),
and a script with named problems picks some with ``problems=a,b``. ``replot=FILE`` draws the
plot and table of a recorded run without measuring anything. Bad input exits with code 2 and
one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tilesearch.experiment import output
from tilesearch.experiment.config import Experiment, ExperimentError
from tilesearch.experiment.run import run

_LISTS = {"strategies": str, "seeds": int, "peers": str}
_SCALARS = {"trials": int, "top": int, "repeats": int, "budget_s": float, "out": str, "runner": str, "title": str}


def pairs(argv: list[str]) -> list[tuple[str, str]]:
    """``key=value``, ``--key value`` and ``--key=value`` as ``(key, value)`` pairs (``-`` in a
    key read as ``_``)."""
    out, args = [], list(argv)
    while args:
        arg = args.pop(0)
        if arg.startswith("--"):
            key, eq, value = arg[2:].partition("=")
            if not eq:
                if not args:
                    raise ExperimentError(f"{arg} needs a value")
                value = args.pop(0)
        else:
            key, eq, value = arg.partition("=")
            if not eq:
                raise ExperimentError(f"{arg!r} is not key=value; keys: {', '.join([*_LISTS, *_SCALARS])}")
        out.append((key.replace("-", "_"), value))
    return out


Option = Callable[[Experiment, str], Experiment]


def configure(experiment: Experiment, argv: list[str], catalog: dict[str, dict[str, Any]] | None = None,
              pick: str = "problems", options: dict[str, Option] | None = None) -> Experiment:
    """``experiment`` with the command line's overrides (see the module docstring); ``options``
    are a script's own keys, each a function of the experiment and the value."""
    changes: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for key, value in pairs(argv):
        try:
            if options and key in options:
                experiment = options[key](experiment, value)
            elif key in _LISTS:
                changes[key] = tuple(_LISTS[key](v) for v in value.split(",") if v)
            elif key in _SCALARS:
                changes[key] = _SCALARS[key](value)
            elif key == pick and catalog:
                unknown = [v for v in value.split(",") if v not in catalog]
                if unknown:
                    raise ExperimentError(f"unknown problem {unknown[0]!r}; use some of {', '.join(catalog)}")
                changes["problems"] = tuple(dict(catalog[v]) for v in value.split(","))
            else:
                params[key] = value
        except (ValueError, KeyError) as e:
            if isinstance(e, ExperimentError):
                raise
            raise ExperimentError(f"{key}={value}: {type(e).__name__}: {e}") from None
    experiment = replace(experiment, **changes)
    if params:
        from tilesearch import registry

        operator = registry.load(experiment.op)
        try:
            problems = tuple(operator.problem(**{**p, **params}).to_dict() for p in experiment.problems)
        except Exception as e:  # noqa: BLE001 - the operator's own message says what is wrong
            raise ExperimentError(f"{', '.join(params)}: {e} (keys: {', '.join([*_LISTS, *_SCALARS])} "
                                  f"or parameters of {experiment.op})") from None
        experiment = replace(experiment, problems=problems)
    return experiment


def main(experiment: Experiment, argv: list[str] | None = None, *,
         catalog: dict[str, dict[str, Any]] | None = None, pick: str = "problems",
         options: dict[str, Option] | None = None, verdict: Callable[[dict[str, Any]], str] | None = None) -> int:
    """Runs ``experiment`` with the command line's overrides (``out`` defaults to ``$OUT``), or
    redraws a recorded run (``replot=FILE``). ``catalog`` names problems that the key ``pick``
    (``problems=a,b``) chooses from; ``options`` are the script's own keys (see
    :func:`configure`); ``verdict(result)`` (a script's reading of the JSON: does
    the claim hold?) is printed under the table, and of a recorded run too. Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        given = dict(pairs(argv))
        if "replot" in given:
            result = output.load(given["replot"])
            output.plot(result, Path(given["replot"]).with_suffix(".png"))
            print(output.table(result))
            if verdict:
                print(verdict(result))
            return 0
        if os.environ.get("OUT") and "out" not in given:
            argv.append(f"out={os.environ['OUT']}")
        experiment = configure(experiment, argv, catalog, pick, options)
        from tilesearch.experiment.peers import resolve

        [resolve(p) for p in experiment.peers]
    except ExperimentError as e:
        print(f"{Path(sys.argv[0]).name}: {e}", file=sys.stderr)
        return 2
    result = run(experiment)
    if verdict:
        print(verdict(result))
    return 0
