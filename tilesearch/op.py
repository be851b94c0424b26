"""The operator plugin interface.

An operator is a plain object: the problem parameters it takes, a knob space, a tile-program
template, and what the runner needs to check and time a kernel (inputs, reference, baseline,
FLOP and byte counts, tolerance). Plugins are found through the entry-point group
``tilesearch.ops`` (see :mod:`tilesearch.registry`).

Call order, per candidate: :meth:`Operator.space` once per problem and target; :meth:`Operator.build`
in a builder process (which calls :meth:`Operator.program` and :meth:`Operator.pass_configs`);
then in the runner process :meth:`Operator.make_inputs`, :meth:`Operator.make_outputs`, the
kernel as ``kernel(*inputs, *outputs)``, :meth:`Operator.reference` and :meth:`Operator.baseline`.

What an operator knows about its own performance it says through optional hooks with neutral
defaults, so the search machinery holds no operator's name: :meth:`Operator.features` (analytic
cost-model features), :meth:`Operator.estimate` (the cost model's prior) and
:meth:`Operator.hints` (configurations to try first). A strategy calls them in the tuning process,
for the problem being tuned and for the problems it transfers from.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tilesearch.space import Config, Space
from tilesearch.target import Target


class ProblemError(ValueError):
    """A problem parameter is missing, unknown or out of range."""


class HintError(ValueError):
    """The operator offers no hints of that kind."""


@dataclass(frozen=True)
class Param:
    """One problem parameter (``m``, ``dtype``, ``layout``...).

    Attributes:
        name: key used on the command line and in Python.
        kind: ``int`` or ``str``.
        default: value when not given; ``None`` makes the parameter required.
        choices: allowed values, for ``str`` parameters.
        minimum: smallest allowed value, for ``int`` parameters.
        help: one line for ``tilesearch ops``.
    """

    name: str
    kind: type = int
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    help: str = ""

    def parse(self, raw: Any) -> Any:
        if self.kind is int:
            try:
                value = int(raw)
                if isinstance(raw, float) and raw != value:
                    raise ValueError
            except (TypeError, ValueError):
                if isinstance(raw, str) and ".." in raw:
                    raise ProblemError(f"{self.name}={raw} is a range: tune it with tilesearch.tune_range") from None
                raise ProblemError(f"{self.name}={raw!r} is not an integer") from None
            if self.minimum is not None and value < self.minimum:
                raise ProblemError(f"{self.name}={value} must be >= {self.minimum}")
        else:
            value = str(raw)
        if self.choices is not None and value not in self.choices:
            raise ProblemError(f"{self.name}={value!r} is not one of {', '.join(map(str, self.choices))}")
        return value

    def describe(self) -> str:
        text = f"{self.name}: {self.kind.__name__}"
        if self.choices:
            text += " in {" + ", ".join(map(str, self.choices)) + "}"
        if self.minimum is not None:
            text += f" >= {self.minimum}"
        text += " (required)" if self.default is None else f" (default {self.default})"
        return text


class Problem(Mapping[str, Any]):
    """An operator's parameters, validated and complete: ``gemm`` with ``m=8192, n=8192, ...``."""

    def __init__(self, op: str, params: Mapping[str, Any]) -> None:
        self.op = op
        self._params = dict(params)

    def __getitem__(self, key: str) -> Any:
        return self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and (self.op, self._params) == (other.op, other._params)

    def __hash__(self) -> int:
        return hash((self.op, self.key))

    def __repr__(self) -> str:
        return f"Problem({self.op}: {self.key})"

    @property
    def key(self) -> str:
        """``m=8192,n=8192,k=8192,dtype=float16,layout=nn`` in the operator's parameter order."""
        return ",".join(f"{k}={v}" for k, v in self._params.items())

    def to_dict(self) -> dict[str, Any]:
        return dict(self._params)


@dataclass(frozen=True)
class Tolerance:
    """Largest accepted errors against the reference.

    Attributes:
        rel_fro: ``||out - ref||_F / ||ref||_F``.
        max_rel: ``max|out - ref| / max|ref|``.
    """

    rel_fro: float
    max_rel: float


class Operator(abc.ABC):
    """Base class of operator plugins. Subclasses set ``name``, ``params`` and the abstract methods."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    knob_version: ClassVar[int] = 1
    """Raise it when a knob keeps its name but changes what it does: measurements recorded under
    another version are not reused (see :mod:`tilesearch.provenance`)."""
    defaults: ClassVar[dict[str, Any]] = {}
    """Knob values the template takes when a configuration leaves the knob out (a sub-space, or
    a record from before the knob existed)."""
    runtime_params: ClassVar[tuple[str, ...]] = ()
    """Integer parameters the template can compile as run-time values (``T.dynamic``), so that
    one kernel serves every size: ``build(..., runtime=("m",))``. Only these may be given as a
    range (``m=1..16384``, :mod:`tilesearch.ranges`)."""

    def problem(self, **raw: Any) -> Problem:
        """Validates raw parameters (strings from the command line are fine) into a :class:`Problem`."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ProblemError(
                f"unknown parameter {unknown[0]!r} for op {self.name!r}; its parameters are "
                + ", ".join(known)
            )
        values = {}
        for p in self.params:
            if p.name in raw:
                values[p.name] = p.parse(raw[p.name])
            elif p.default is None:
                raise ProblemError(f"op {self.name!r} needs {p.name}=... ({p.describe()})")
            else:
                values[p.name] = p.default
        return Problem(self.name, values)

    @abc.abstractmethod
    def space(self, problem: Problem, target: Target) -> Space:
        """The knob space for ``problem`` on ``target``, constraints included."""

    @abc.abstractmethod
    def program(self, problem: Problem, config: Config, target: Target) -> Any:
        """The tile program (a TileLang ``PrimFunc``) for one configuration, compiled for
        ``target`` (its SM count sizes a persistent launch, say)."""

    def pass_configs(self, problem: Problem, config: Config) -> dict[str, Any]:
        """TileLang pass configurations for one configuration (none by default)."""
        return {}

    def build(self, problem: Problem, config: Config, target: Target, runtime: tuple[str, ...] = ()) -> Any:
        """Compiles one configuration; TileLang's disk cache makes a second call cheap.

        ``runtime``: parameters (of :attr:`runtime_params`) to compile as run-time values, passed
        on to :meth:`program`; the problem's value of each is then only an example size. The
        result is a compiled kernel or a :class:`~tilesearch.composite.Composite` of them.
        """
        import logging

        import tilelang

        logging.getLogger("tilelang").setLevel(logging.WARNING)  # TileLang logs as "tilelang"

        program = self.program(problem, config, target, runtime=runtime) if runtime else self.program(problem, config, target)
        return tilelang.compile(
            program,
            target=target.tvm(),
            pass_configs=self.pass_configs(problem, config) or None,
        )

    @abc.abstractmethod
    def make_inputs(self, problem: Problem, device: Any, generator: Any) -> tuple[Any, ...]:
        """Fresh random inputs (never zeros) as torch tensors on ``device``."""

    @abc.abstractmethod
    def make_outputs(self, problem: Problem, device: Any) -> tuple[Any, ...]:
        """Output tensors the kernel writes; the runner poisons them before each check."""

    @abc.abstractmethod
    def reference(self, problem: Problem, inputs: Sequence[Any]) -> tuple[Any, ...]:
        """Expected outputs, computed in float64 (or float32 on upcast inputs)."""

    def baseline(self, problem: Problem, inputs: Sequence[Any]) -> Callable[[], Any] | None:
        """A no-argument callable running the usual PyTorch way of computing the op, or ``None``."""
        return None

    @abc.abstractmethod
    def flops(self, problem: Problem) -> float:
        """Floating-point operations of one call."""

    @abc.abstractmethod
    def bytes(self, problem: Problem) -> float:
        """Fewest bytes one call moves through device memory."""

    @abc.abstractmethod
    def tolerance(self, problem: Problem, config: Config) -> Tolerance:
        """Errors accepted for ``config`` against the reference."""

    # -- optional, neutral by default: what the operator knows about its performance, and examples --

    hint_kinds: ClassVar[tuple[str, ...]] = ()
    """The kinds of :meth:`hints` the operator offers (``"carver"``...)."""

    examples: ClassVar[tuple[dict[str, Any], ...]] = ()
    """A few small problems that the operator conformance suite (:mod:`tilesearch.testing.operators`)
    checks, the first one also compiled with nvcc: include sizes that are multiples of no tile."""

    def features(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> dict[str, float]:
        """Analytic cost-model features of one configuration (tiles, waves, intensity...), added
        to the knob values and problem parameters that every operator gets. ``config`` has the
        operator's :attr:`defaults` filled in. None by default."""
        return {}

    def estimate(self, problem: Mapping[str, Any], config: Mapping[str, Any], target: Target) -> float:
        """Throughput of one configuration relative to the GPU's peak, in (0, 1], from an
        analytic model: the cost model's prior, of which only the order it gives to the
        configurations of one problem matters. ``1.0`` for all (a flat prior) by default."""
        return 1.0

    def rivals(self, problem: Mapping[str, Any], space: Space, config: Mapping[str, Any]) -> list[Config]:
        """Configurations that do the same work as ``config`` by another route several knobs away
        (a GEMM's K step twice as wide and half as many stages deep: the same bytes in flight),
        which a search tends to settle on instead of it. The end-of-search polish measures them
        beside the one-knob steps (``TuneSettings.polish``), so that two searches that settled on
        either route both re-time the other. They need not be valid: the polish drops those
        ``space`` rejects. ``space`` is given so that a rival can be fitted to what the target
        allows (a pipeline as deep as its shared memory holds) rather than the op restating the
        target's limits. None by default."""
        return []

    def refits(self, problem: Problem, space: Space, target: Target, config: Mapping[str, Any], n: int) -> list[Config]:
        """Up to ``n`` distinct valid configurations of ``space``, other than ``config``, that do its
        work in pieces that fill ``target`` at this problem, most promising first: what may win at
        a size between a range's tuned sizes, where neither tuned size's pieces fill the GPU (a
        GEMM's tiles once M leaves them half a wave short). A range times them at its probes
        beside the tuned sizes' winners (:mod:`tilesearch.range_tuner`). None by default."""
        return []

    def hints(self, problem: Problem, space: Space, target: Target, *, kind: str, n: int) -> list[Config]:
        """Up to ``n`` distinct valid configurations of ``space`` that a model of ``target``
        recommends, best first (``kind`` is one of :attr:`hint_kinds`).

        Raises:
            HintError: the operator offers no hints of that kind.
        """
        offered = ", ".join(self.hint_kinds) or "none"
        raise HintError(f"unknown hints {kind!r} for op {self.name!r}; it offers: {offered}")
