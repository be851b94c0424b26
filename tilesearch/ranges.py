"""Shape ranges: one integer problem parameter given as ``lo..hi`` (``m=1..16384``).

A range is allowed only on a parameter the operator compiles as a run-time value
(:attr:`~tilesearch.op.Operator.runtime_params`): one kernel then serves every size of a
bucket, and one artifact with a dispatch table serves the whole range
(:mod:`tilesearch.range_tuner`, :mod:`tilesearch.deploy.dispatch`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilesearch.op import Operator, Problem, ProblemError

SEPARATOR = ".."


class RangeError(ProblemError):
    """A range that is malformed, empty or reversed, or on a parameter that cannot vary."""


@dataclass(frozen=True)
class SizeRange:
    """The sizes ``lo..hi`` (both included) of parameter ``name``."""

    name: str
    lo: int
    hi: int

    def __str__(self) -> str:
        return f"{self.lo}{SEPARATOR}{self.hi}"

    def __contains__(self, size: object) -> bool:
        return isinstance(size, int) and self.lo <= size <= self.hi


def is_range(raw: Any) -> bool:
    """Whether a raw parameter value asks for a range: ``"1..16384"``, or a ``(lo, hi)`` pair or
    ``range`` object from Python."""
    return isinstance(raw, tuple | list | range) or (isinstance(raw, str) and SEPARATOR in raw)


def parse(op: Operator, raw: Mapping[str, Any]) -> tuple[SizeRange | None, dict[str, Any]]:
    """Splits raw problem parameters into the one range among them (or ``None``) and the rest.

    Raises :class:`RangeError` for a malformed, empty or reversed range, a range below the
    parameter's minimum, more than one range, or a range on a parameter that is not one of the
    op's run-time parameters.
    """
    ranges = [name for name, value in raw.items() if is_range(value)]
    if not ranges:
        return None, dict(raw)
    if len(ranges) > 1:
        raise RangeError(f"{' and '.join(ranges)} are both ranges; give a range for one parameter only")
    name = ranges[0]
    params = {p.name: p for p in op.params}
    if name not in params:
        raise RangeError(f"unknown parameter {name!r} for op {op.name!r}; its parameters are {', '.join(params)}")
    if name not in op.runtime_params:
        can = ", ".join(op.runtime_params) or "none"
        raise RangeError(
            f"{name} cannot be a range: {op.name} compiles only these parameters as run-time values: {can}; "
            f"give one {name}=N"
        )
    lo, hi = _ends(name, raw[name])
    minimum = params[name].minimum
    if minimum is not None and lo < minimum:
        raise RangeError(f"{name}={lo}{SEPARATOR}{hi} starts below the smallest {name}, {minimum}")
    if hi < lo:
        raise RangeError(f"{name}={lo}{SEPARATOR}{hi} is reversed; write {name}={hi}{SEPARATOR}{lo}")
    if hi == lo:
        raise RangeError(f"{name}={lo}{SEPARATOR}{hi} holds one size; write {name}={lo}")
    return SizeRange(name, lo, hi), {k: v for k, v in raw.items() if k != name}


def _ends(name: str, raw: Any) -> tuple[int, int]:
    if isinstance(raw, range):
        if raw.step != 1 or len(raw) == 0:
            raise RangeError(f"{name}={raw!r} must be a non-empty range with step 1")
        return raw.start, raw.stop - 1
    if isinstance(raw, tuple | list):
        if len(raw) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
            raise RangeError(f"{name}={raw!r}: a range from Python is a pair of integers (lo, hi)")
        return int(raw[0]), int(raw[1])
    match = re.fullmatch(r"\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*", raw)
    if match is None:
        lo, _, hi = raw.partition(SEPARATOR)
        if not lo.strip() or not hi.strip():
            raise RangeError(f"{name}={raw!r} is an empty range: give both ends, e.g. {name}=1..16384")
        raise RangeError(f"{name}={raw!r}: both ends of a range must be integers, e.g. {name}=1..16384")
    return int(match.group(1)), int(match.group(2))


def problem_at(op: Operator, size_range: SizeRange, rest: Mapping[str, Any], size: int) -> Problem:
    """The problem with the range's parameter set to ``size``."""
    return op.problem(**{**rest, size_range.name: size})


def range_key(op: Operator, size_range: SizeRange, rest: Mapping[str, Any]) -> str:
    """The problem key with the range in its parameter's place: ``m=1..16384,n=4096,...``."""
    example = problem_at(op, size_range, rest, size_range.lo)
    return ",".join(f"{k}={size_range if k == size_range.name else v}" for k, v in example.items())
