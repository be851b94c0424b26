"""Search spaces: typed knobs, constraints between them, enumeration, sampling, Optuna mapping.

A configuration is a plain ``dict`` from knob name to value. A :class:`Space` is a product of
knobs filtered by constraints; each constraint is a function that returns ``None`` for a valid
configuration and a short reason (``"shared memory 262144 B > 232448 B"``) otherwise, so that a
pruned configuration is recorded with why it was pruned.
"""

from __future__ import annotations

import abc
import hashlib
import itertools
import json
import math
import random
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Container, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import optuna.distributions as od

from tilesearch import walk

Config = dict[str, Any]
Constraint = Callable[[Mapping[str, Any]], "str | None"]


class Knob(abc.ABC):
    """One schedule knob: a name and a finite, ordered set of values."""

    name: str

    @abc.abstractmethod
    def values(self) -> tuple[Any, ...]:
        """All values, in their natural order."""

    @abc.abstractmethod
    def distribution(self) -> od.BaseDistribution:
        """The Optuna distribution that the knob's parameter is sampled from."""

    def to_param(self, value: Any) -> Any:
        """The Optuna parameter value that stands for ``value``."""
        return value

    def from_param(self, param: Any) -> Any:
        """The knob value that the Optuna parameter ``param`` stands for."""
        return param

    def describe(self) -> str:
        return "{" + ", ".join(str(v) for v in self.values()) + "}"


@dataclass(frozen=True)
class Categorical(Knob):
    """A knob whose values have no order (``warp_policy``) or few enough to list."""

    name: str
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError(f"knob {self.name!r} has no choices")
        object.__setattr__(self, "choices", tuple(self.choices))

    def values(self) -> tuple[Any, ...]:
        return self.choices

    def distribution(self) -> od.BaseDistribution:
        return od.CategoricalDistribution(self.choices)


@dataclass(frozen=True)
class PowerOfTwo(Knob):
    """Powers of two from ``low`` to ``high`` inclusive; sampled on the exponent (log scale)."""

    name: str
    low: int
    high: int

    def __post_init__(self) -> None:
        for v in (self.low, self.high):
            if v < 1 or v & (v - 1):
                raise ValueError(f"knob {self.name!r}: {v} is not a power of two")
        if self.low > self.high:
            raise ValueError(f"knob {self.name!r}: low {self.low} > high {self.high}")

    def values(self) -> tuple[int, ...]:
        return tuple(1 << e for e in range(self.low.bit_length() - 1, self.high.bit_length()))

    def distribution(self) -> od.BaseDistribution:
        return od.IntDistribution(self.low.bit_length() - 1, self.high.bit_length() - 1)

    def to_param(self, value: int) -> int:
        return int(math.log2(value))

    def from_param(self, param: int) -> int:
        return 1 << int(param)


@dataclass(frozen=True)
class IntRange(Knob):
    """Integers ``low, low+step, ..., high``."""

    name: str
    low: int
    high: int
    step: int = 1

    def __post_init__(self) -> None:
        if self.step < 1 or self.low > self.high or (self.high - self.low) % self.step:
            raise ValueError(f"knob {self.name!r}: bad range {self.low}..{self.high} step {self.step}")

    def values(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1, self.step))

    def distribution(self) -> od.BaseDistribution:
        return od.IntDistribution(self.low, self.high, step=self.step)


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text of a configuration: equal configurations give equal keys."""
    return json.dumps(dict(sorted(config.items())), separators=(",", ":"), default=str)


def digest(*parts: Any) -> str:
    """A short content hash of the canonical JSON of ``parts``."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Space:
    """The product of ``knobs`` less the configurations that a constraint rejects.

    Args:
        knobs: the knobs, in the order they are enumerated (the last varies fastest).
        constraints: functions of a configuration returning ``None`` when valid, else a reason.
        key: what the constraints are a function of besides the configuration (an op gives its
            problem and target): spaces of equal keys and knob values list the same valid
            configurations, so a process lists them once (:meth:`listing`). ``None``: each
            space is listed for itself.
    """

    def __init__(self, knobs: Sequence[Knob], constraints: Sequence[Constraint] = (), *,
                 key: Hashable | None = None) -> None:
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate knob names in {names}")
        self.knobs: tuple[Knob, ...] = tuple(knobs)
        self.constraints: tuple[Constraint, ...] = tuple(constraints)
        self._by_name = {k.name: k for k in self.knobs}
        # knob values are fixed: computed once, not on every check (enumeration checks them all)
        self._names = tuple(names)
        self._values = tuple(k.values() for k in self.knobs)
        self._key, self._keyed = key, self.constraints  # the constraints the key speaks for
        self._listed: tuple[tuple[Constraint, ...], Listing] | None = None  # the constraints listed with, and the listing

    def __getitem__(self, name: str) -> Knob:
        return self._by_name[name]

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def size(self) -> int:
        """Number of configurations before constraints."""
        return math.prod(len(k.values()) for k in self.knobs)

    def why_invalid(self, config: Mapping[str, Any]) -> str | None:
        """``None`` if ``config`` is in the space and meets every constraint, else the first reason."""
        missing = [n for n in self._names if n not in config]
        if missing:
            return f"missing knobs {missing}"
        if len(config) != len(self._names):
            return f"unknown knobs {sorted(set(config) - set(self._names))}"
        for knob, values in zip(self.knobs, self._values):
            if config[knob.name] not in values:
                return f"{knob.name}={config[knob.name]!r} not in {knob.describe()}"
        return self.unmet(config)

    def unmet(self, config: Mapping[str, Any]) -> str | None:
        """The first reason a constraint gives against ``config``, or ``None``; its knobs and
        values are not checked (a value the space does not search yet still meets or fails them)."""
        for check in self.constraints:
            reason = check(config)
            if reason:
                return reason
        return None

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        return self.why_invalid(config) is None

    def enumerate(self, *, valid_only: bool = True) -> Iterator[Config]:
        """All configurations in knob order, by default only the valid ones (:meth:`listing`)."""
        if valid_only:
            yield from self.listing()
            return
        for combo in itertools.product(*self._values):
            yield dict(zip(self._names, combo))

    def listing(self) -> Listing:
        """The valid configurations in knob order, found without checking each one of the
        product (:mod:`tilesearch.walk`) and kept: by this space, and for the process where the
        space has a ``key`` (:data:`LISTINGS_KEPT` of them). A small-M GEMM space's listing
        took 1.5-3.5 s on a 2-core CPU machine (2026-12-03), and a range lists each size's space
        several times (its search, its refining, a rerun) and ``random`` or ``xgb`` list it for
        every study. Each configuration read from it is a dict of its own."""
        if self._listed is not None and self._listed[0] is self.constraints:
            return self._listed[1]
        keyed = self._key is not None and self.constraints is self._keyed
        key = (self._key, self._names, _typed(self._values)) if keyed else None
        with _LISTINGS_LOCK:
            positions = _LISTINGS.get(key) if key is not None else None
            if positions is not None:
                _LISTINGS.move_to_end(key)
        if positions is None:
            positions = array("q", walk.positions(self._names, self._values, self.constraints))
            if key is not None:
                with _LISTINGS_LOCK:
                    _LISTINGS[key] = positions
                    while len(_LISTINGS) > LISTINGS_KEPT:
                        _LISTINGS.popitem(last=False)
        self._listed = (self.constraints, Listing(walk.decoder(self._names, self._values), positions))
        return self._listed[1]

    def count_valid(self) -> int:
        return len(self.listing())

    def shuffled(self, rng: random.Random) -> Iterator[Config]:
        """The valid configurations in an order ``rng`` fixes, each once, every order alike
        likely: ``random``'s order. A product of fewer than :data:`DRAWN_FROM` configurations is
        listed and shuffled; a larger one is drawn from, each draw checked, as a search reads
        only the first few: 43,000-152,000 of the 1.5-3.1 million configurations of a small-M
        GEMM were valid, 0.7-1.8 s to list on a 2-core CPU machine, and a range's probes listed
        each size's space to search 4 of them (2026-12-03). After :data:`MISSES` draws in a row
        that find nothing new, the rest is listed and shuffled."""
        if self.size < DRAWN_FROM:
            yield from self.listing().shuffled(rng)
            return
        at, drawn, misses = walk.decoder(self._names, self._values), set(), 0
        while misses < MISSES:
            position = rng.randrange(self.size)
            config = at(position)
            if position in drawn or self.unmet(config):
                misses += 1
                continue
            drawn.add(position)
            misses = 0
            yield config
        yield from self.listing().shuffled(rng, skip=drawn)

    def pruned(self) -> dict[str, int]:
        """How many configurations each first-failing reason prunes (reasons with numbers folded)."""
        counts: dict[str, int] = {}
        for config in self.enumerate(valid_only=False):
            reason = self.why_invalid(config)
            if reason:
                head = reason.split(":")[0]
                counts[head] = counts.get(head, 0) + 1
        return counts

    def draw(self, rng: random.Random) -> Config:
        """A configuration drawn uniformly from the product of the knobs, valid or not."""
        return {name: rng.choice(values) for name, values in zip(self._names, self._values)}

    def sample(self, rng: random.Random, *, max_tries: int = 10_000) -> Config:
        """A valid configuration drawn uniformly by rejection."""
        for _ in range(max_tries):
            config = self.draw(rng)
            if self.why_invalid(config) is None:
                return config
        raise RuntimeError(f"no valid configuration found in {max_tries} samples")

    def neighbours(self, config: Mapping[str, Any]) -> list[Config]:
        """The valid configurations that differ from ``config`` in exactly one knob."""
        found = []
        for name, values in zip(self._names, self._values):
            for value in values:
                if value != config[name]:
                    other = {**config, name: value}
                    if self.why_invalid(other) is None:
                        found.append(other)
        return found

    def steps(self, config: Mapping[str, Any]) -> list[Config]:
        """The valid configurations one step from ``config``, in knob order: along an ordered
        knob (one whose values are all numbers) the next smaller or larger value, along any
        other knob every other value (a categorical knob's values have no order to step in)."""
        found = []
        for name, values in zip(self._names, self._values):
            at = values.index(config[name])
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                near = [i for i in (at - 1, at + 1) if 0 <= i < len(values)]
            else:
                near = [i for i in range(len(values)) if i != at]
            for i in near:
                other = {**config, name: values[i]}
                if self.why_invalid(other) is None:
                    found.append(other)
        return found

    def distributions(self) -> dict[str, od.BaseDistribution]:
        """Optuna distributions, one per knob, keyed by knob name."""
        return {k.name: k.distribution() for k in self.knobs}

    def to_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {k.name: k.to_param(config[k.name]) for k in self.knobs}

    def from_params(self, params: Mapping[str, Any]) -> Config:
        return {k.name: k.from_param(params[k.name]) for k in self.knobs}

    def describe(self) -> list[tuple[str, str]]:
        return [(k.name, k.describe()) for k in self.knobs]


class Listing(Sequence[Config]):
    """A space's valid configurations, kept as their positions in the product (one 8-byte
    integer each, where a configuration is a dict of every knob: 152,000 of a small-M GEMM
    space) and made into a fresh dict when read, so that no reader changes another's."""

    def __init__(self, at: Callable[[int], Config], positions: array) -> None:
        self._at, self._positions = at, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> Config: ...

    @overload
    def __getitem__(self, index: slice) -> Listing: ...

    def __getitem__(self, index: int | slice) -> Config | Listing:
        if isinstance(index, slice):
            return Listing(self._at, self._positions[index])
        return self._at(self._positions[index])

    def __iter__(self) -> Iterator[Config]:
        return map(self._at, self._positions)

    def shuffled(self, rng: random.Random, skip: Container[int] = ()) -> Listing:
        """The same configurations, less those at the positions ``skip``, in the order
        ``rng.shuffle`` gives a list of them."""
        positions = [p for p in self._positions if p not in skip] if skip else list(self._positions)
        rng.shuffle(positions)
        return Listing(self._at, array("q", positions))


DRAWN_FROM = 1 << 20
"""Spaces of at least this many configurations before constraints are drawn from for a random
order (:meth:`Space.shuffled`), smaller ones listed: a GEMM at 1024 or 4096 rows (311,000 and
389,000) lists in 0.2-0.4 s, and the recorded datasets' spaces (at most 311,000) and the toy
operators' keep the seeded orders of their recorded benchmark runs."""

MISSES = 2000
"""Draws in a row that find no new valid configuration after which :meth:`Space.shuffled` lists
the rest: where 5% of the product is valid, as in a small-M GEMM, 2000 draws in a row all miss
with a chance of 3 in 10^45."""

LISTINGS_KEPT = 64
"""Listings of keyed spaces a process keeps, the least recently used dropped first: a range's
sizes, probes and held-out sizes are a few dozen spaces, at most 1.2 MB each (152,000 valid
configurations of a small-M GEMM)."""

_LISTINGS: OrderedDict[Hashable, array] = OrderedDict()
_LISTINGS_LOCK = threading.Lock()


def _typed(values: Sequence[Sequence[Any]]) -> tuple[tuple[tuple[type, Any], ...], ...]:
    """Knob values with their types, as a cache key: ``(False, True)`` equals ``(0, 1)``."""
    return tuple(tuple((type(v), v) for v in vs) for vs in values)
