"""A tiny operator for tests of the search machinery: a knob space with constraints and no kernel.

Its ``program`` is never compiled in these tests (they use a synthetic runner and no builder).
"""

from __future__ import annotations

from typing import Any

from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.space import Categorical, Config, IntRange, PowerOfTwo, Space
from tilesearch.target import Target

TOY_OP = "tilesearch.testing.toy:ToyOp"


class ToyOp(Operator):
    name = "toy"
    description = "knob space only, for tests"
    params = (Param("size", int, minimum=1),)
    examples = ({"size": 64},)

    def space(self, problem: Problem, target: Target) -> Space:
        def area(c: dict) -> str | None:
            a = c["tile_a"] * c["tile_b"]
            return f"area: {a} > 8192" if a > 8192 else None

        return Space(
            [
                PowerOfTwo("tile_a", 16, 256),
                PowerOfTwo("tile_b", 16, 256),
                IntRange("depth", 1, 4),
                Categorical("order", ("row", "col")),
            ],
            [area],
        )

    def program(self, problem: Problem, config: Config, target: Target) -> Any:
        raise NotImplementedError("the toy op has no kernel")

    def make_inputs(self, problem: Problem, device: Any, generator: Any) -> tuple[Any, ...]:
        return ()

    def make_outputs(self, problem: Problem, device: Any) -> tuple[Any, ...]:
        return ()

    def reference(self, problem: Problem, inputs: Any) -> tuple[Any, ...]:
        return ()

    def flops(self, problem: Problem) -> float:
        return float(problem["size"])

    def bytes(self, problem: Problem) -> float:
        return float(problem["size"])

    def tolerance(self, problem: Problem, config: Config) -> Tolerance:
        return Tolerance(1e-6, 1e-6)
