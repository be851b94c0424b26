"""The valid configurations of a space, without checking every one of the product.

Why: a space is a product of knobs filtered by constraints, and the constraints are plain
functions of a whole configuration. Checking each configuration of the product took 11 s at 255
rows of a GEMM (3.1 million configurations, 152,000 valid: small M offers 16-row tiles, 12 stages
and swapped operands), nearly all of a ``strategy=random`` tune's proposing there; and ``random``, ``grid``, the cost model's
listing and the op's hints all list the space before their first proposal. A range's probes paid
it again at each size.

How: the knobs are assigned one at a time and after each assignment the constraints not yet
decided run on the configuration so far (:class:`Partial`). A constraint that reads a knob not yet
assigned is stopped there (:class:`Undecided`) and tried again once that knob is assigned: until
then it reads what it read before and stops at the same knob. One that returns without being
stopped has read only assigned knobs: a reason then rejects every configuration below, and
``None`` accepts them all, so it is not run again there. This holds for constraints that are
functions of the configuration alone, as a space's are. The knobs that most constraints read are
assigned first (:func:`walk_order`, from a few drawn configurations), so that the constraints
decide early; the configurations found are then put in the product's order (the last knob
fastest), as a product filtered one by one gives them. At that GEMM size this lists the space in
1.6 s where checking each configuration took 10.7 s; walking the knobs in the space's order (swapped
operands last) had taken 3.5 s. With the cluster and stream-K knobs on, 2657 x 6144 x 4096 lists in
0.9 s, against 49 s (``scripts/space_listing.py``, a 2-core CPU machine, 2026-11-29). A stopped
constraint tried again at every knob, not only at the one it stopped at, made 200 rows of
1024 x 2048 list in 2.8 s where they now take 1.8 s, and 64 rows in 2.0 s where they take 1.2 s
(the same machine, 2026-12-03).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

_MISSING = object()


class Undecided(BaseException):
    """A constraint read a knob that is not assigned yet (``knob``; ``WHOLE``: it asked for
    the whole configuration). A ``BaseException``, so that a constraint's own ``except
    Exception`` does not take it for a failure of its own."""

    def __init__(self, knob: str) -> None:
        super().__init__(knob)
        self.knob = knob


WHOLE = "the whole configuration"
"""What :class:`Undecided` names for a constraint that iterated the configuration: no knob, so it
is run again only once every knob is assigned."""


class Partial(Mapping):
    """A configuration with some knobs assigned, as a constraint sees it: reading any other knob
    of the space raises :class:`Undecided`; a name that is not a knob reads as missing, as it
    would in the whole configuration (``config.get("cluster", "off")`` where ``cluster`` is not
    searched)."""

    __slots__ = ("_assigned", "_names")

    def __init__(self, assigned: dict[str, Any], names: frozenset[str]) -> None:
        self._assigned, self._names = assigned, names

    def __getitem__(self, name: str) -> Any:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:  # Mapping's own goes through KeyError: this is the hot path
        value = self._assigned.get(name, _MISSING)
        if value is _MISSING:
            if name in self._names:
                raise Undecided(name)
            return default
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        raise Undecided(WHOLE)

    def __len__(self) -> int:
        return len(self._names)


def valid(names: Sequence[str], values: Sequence[Sequence[Any]],
          constraints: Sequence[Any]) -> list[dict[str, Any]]:
    """The configurations of the product of ``values`` (one sequence per knob of ``names``) that
    every constraint accepts, in the product's order (see the module docstring)."""
    at = decoder(names, values)
    return [at(p) for p in positions(names, values, constraints)]


def positions(names: Sequence[str], values: Sequence[Sequence[Any]], constraints: Sequence[Any]) -> list[int]:
    """Where in the product (the last knob fastest) the configurations that :func:`valid` lists
    lie, in ascending order: one integer each, where a configuration is a dict of every knob, so
    that a space can keep its listing (:meth:`tilesearch.space.Space.listing`); :func:`decoder`
    makes one back into its configuration."""
    if not names:
        return []
    order = walk_order(names, values, constraints)
    assigned: dict[str, Any] = {}
    partial = Partial(assigned, frozenset(names))
    found: list[int] = []
    last = len(names) - 1
    strides = _strides(values)

    def walk(depth: int, pending: tuple[tuple[int, str | None], ...], rank: int) -> None:
        knob = order[depth]
        name, stride = names[knob], strides[knob]
        for j, value in enumerate(values[knob]):
            assigned[name] = value
            if depth == last:  # every knob assigned: the constraints left see the whole configuration
                if not any(constraints[i](assigned) for i, _ in pending):
                    found.append(rank + j * stride)
                continue
            still = []
            for i, stopped_at in pending:
                if stopped_at is not None and stopped_at != name:  # stopped at a knob still unassigned
                    still.append((i, stopped_at))
                    continue
                try:
                    reason = constraints[i](partial)
                except Undecided as stop:
                    still.append((i, stop.knob))
                    continue
                except Exception:  # noqa: BLE001 - another error: decided on the whole configuration, as before
                    still.append((i, None))
                    continue
                if reason:
                    break
            else:
                walk(depth + 1, tuple(still), rank + j * stride)
        del assigned[name]

    walk(0, tuple((i, None) for i in range(len(constraints))), 0)
    found.sort()  # the walk's order put back into the product's
    return found


def decoder(names: Sequence[str], values: Sequence[Sequence[Any]]) -> Callable[[int], dict[str, Any]]:
    """The function from a position in the product of ``values`` (the last knob fastest) to the
    configuration there, a new dict with its knobs in the order of ``names``."""
    knobs = [(n, v, s, len(v)) for n, v, s in zip(names, values, _strides(values))]

    def at(position: int) -> dict[str, Any]:
        return {n: v[position // stride % size] for n, v, stride, size in knobs}

    return at


def _strides(values: Sequence[Sequence[Any]]) -> list[int]:
    """How far apart in the product two neighbouring values of each knob lie."""
    return [math.prod(len(v) for v in values[i + 1:]) for i in range(len(values))]


def walk_order(names: Sequence[str], values: Sequence[Sequence[Any]], constraints: Sequence[Any],
               draws: int = 16) -> list[int]:
    """The knobs' indices, those that the most constraints read (over ``draws`` configurations
    drawn from the product with a fixed seed) first; ties in the space's order."""
    rng = random.Random(0)
    reads = dict.fromkeys(names, 0)
    for _ in range(draws):
        config = {n: rng.choice(v) for n, v in zip(names, values)}
        for check in constraints:
            seen: set[str] = set()
            try:
                check(_Reading(config, seen))
            except Exception:  # noqa: BLE001 - what it read before failing still counts
                pass
            for n in seen & reads.keys():
                reads[n] += 1
    return sorted(range(len(names)), key=lambda i: -reads[names[i]])


class _Reading(Mapping):
    """A whole configuration that notes which knobs are read."""

    def __init__(self, config: dict[str, Any], seen: set[str]) -> None:
        self._config, self._seen = config, seen

    def __getitem__(self, name: str) -> Any:
        self._seen.add(name)
        return self._config[name]

    def get(self, name: str, default: Any = None) -> Any:
        self._seen.add(name)
        return self._config.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)
