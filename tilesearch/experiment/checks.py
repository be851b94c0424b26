"""Experiments that are checks, not searches: a fault matrix, an interrupt drill, a deploy drill.

They tune little or nothing, so :func:`tilesearch.experiment.run` does not fit them, but their
scripts are config scripts all the same: a :class:`Check` declares its name, its options with
their defaults, and the function in the package that does the work; :func:`main` is their
shared command line (``key=value`` or ``--key value``, the same as every experiment script;
``out`` defaults to ``$OUT``), makes the output directory, and turns bad input into exit code 2
and one line. The work function gets the options as attributes and returns the exit code; it
writes its own JSON and table under ``out`` and prints the table last.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tilesearch.cli import UsageError, coerce
from tilesearch.experiment.cli import pairs
from tilesearch.experiment.config import ExperimentError


@dataclass(frozen=True)
class Check:
    """One check experiment.

    Attributes:
        name: names the script and its output files.
        work: ``"module:function"`` in the package, called with the options (a namespace) and
            returning the exit code; imported only when the check runs, so a script imports
            without a GPU.
        options: every option with its default; a given value is converted to the default's
            type, as ``tilesearch``'s own command line converts (:func:`tilesearch.cli.coerce`);
            ``None`` defaults stay strings.
    """

    name: str
    work: str
    options: dict[str, Any] = field(default_factory=dict)

    def parse(self, argv: list[str]) -> SimpleNamespace:
        """The options with the command line's values, or :class:`ExperimentError`."""
        values = {"out": os.environ.get("OUT", "out"), **self.options}
        for key, raw in pairs(argv):
            if key not in values:
                raise ExperimentError(f"unknown key {key!r}; keys: {', '.join(sorted(values))}")
            try:
                values[key] = coerce(key, raw, values[key] if key in self.options else "")
            except UsageError as e:
                raise ExperimentError(str(e)) from None
        return SimpleNamespace(**values)


def main(check: Check, argv: list[str] | None = None) -> int:
    """Runs ``check`` with the command line's options; returns its exit code (2 for bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        options = check.parse(argv)
    except ExperimentError as e:
        print(f"{check.name}: {e}", file=sys.stderr)
        return 2
    Path(options.out).mkdir(parents=True, exist_ok=True)
    from tilesearch.workers import resolve

    work: Callable[[SimpleNamespace], int] = resolve(check.work)
    return int(work(options) or 0)
