"""Conformance suite for operator plugins: subclass :class:`OperatorSuite` and set ``op``.

An operator passes if, on each of its :attr:`~tilesearch.op.Operator.examples` problems:

- the problem survives a round trip through its parameters (as Python values and as the strings
  of the command line), and no parameter is named like a tuning setting;
- the space for sm_90a holds a valid configuration, the operator's knob ``defaults`` are values
  of its knobs, and every constraint returns ``None`` or a reason (a non-empty string);
- FLOP and byte counts are positive and finite, and the tolerance of sampled configurations is
  positive;
- ``make_outputs`` on the meta device gives tensors, and the float64 reference of CPU inputs
  has their shapes;
- its hooks (features, estimate) give finite numbers, an estimate in (0, 1];
- (marked ``nvcc``) a few sampled configurations compile with nvcc for sm_90a, and a compiled
  kernel's parameters end with tensors of the shapes and dtypes of ``make_outputs`` (what
  ``export`` writes into the artifact's specs);
- (marked ``gpu``) sampled configurations are correct on a GPU at every example size (the
  examples should include sizes that are multiples of no tile), and a two-trial tune finds a
  correct best.

``tests/test_operators.py`` runs it over every registered operator (a package that registers one
through the ``tilesearch.ops`` entry point gets these tests for free) and the test operators.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from tilesearch import registry
from tilesearch.op import Operator, Problem
from tilesearch.records import Candidate, Status
from tilesearch.space import Config, Space
from tilesearch.target import Target

TARGET = Target.from_arch("sm_90a")
DRAWS = 200  # configurations drawn (valid or not) to exercise the constraints


class OperatorSuite:
    """Subclass and set ``op`` (a registered name or an import path ``"module:Class"``).

    Attributes:
        op: the operator under test.
        kernels: ``False`` for an operator with no tile program (the nvcc and GPU checks and the
            output checks are skipped).
        builds: sampled configurations compiled with nvcc (keep it small: a few seconds each).
    """

    op: str = ""
    kernels: bool = True
    builds: int = 2

    def operator(self) -> Operator:
        return registry.load(self.op)

    def problems(self) -> list[Problem]:
        op = self.operator()
        assert op.examples, f"op {op.name!r} declares no examples: set Operator.examples to a few small problems"
        return [op.problem(**example) for example in op.examples]

    def configs(self, space: Space, n: int, seed: int = 0) -> list[Config]:
        """``n`` distinct valid configurations drawn at random (fewer if the space has fewer);
        a subclass may narrow the choice (an operator whose knobs fail on purpose, say)."""
        rng, out = random.Random(seed), []
        for _ in range(20 * n):
            config = space.sample(rng)
            if config not in out:
                out.append(config)
            if len(out) == n:
                break
        return out

    # -- no compiler, no GPU --

    def test_problem_round_trip(self) -> None:
        op = self.operator()
        registry.check(op)
        for problem in self.problems():
            assert op.problem(**problem.to_dict()) == problem
            assert op.problem(**{k: str(v) for k, v in problem.items()}).key == problem.key
            assert problem.op == op.name

    def test_space_is_not_empty_and_defaults_are_knob_values(self) -> None:
        op = self.operator()
        for problem in self.problems():
            space = op.space(problem, TARGET)
            assert self.configs(space, 1), f"{problem}: no valid configuration"
            for name, value in op.defaults.items():
                assert name in space.names, f"default {name}={value!r} is not a knob of the space"
                assert value in space[name].values(), f"default {name}={value!r} is not one of its values"
        for param in op.params:
            if param.default is not None:
                assert param.parse(param.default) == param.default

    def test_constraints_return_reasons(self) -> None:
        op = self.operator()
        rng = random.Random(0)
        for problem in self.problems():
            space = op.space(problem, TARGET)
            for _ in range(DRAWS):
                config = space.draw(rng)
                for check in space.constraints:
                    reason = check(config)
                    assert reason is None or (isinstance(reason, str) and reason.strip()), (check, config, reason)

    def test_counts_and_tolerance_are_positive(self) -> None:
        op = self.operator()
        for problem in self.problems():
            assert 0 < op.flops(problem) < math.inf and 0 < op.bytes(problem) < math.inf
            for config in self.configs(op.space(problem, TARGET), 4):
                tolerance = op.tolerance(problem, config)
                assert tolerance.rel_fro > 0 and tolerance.max_rel > 0

    def test_hooks_give_finite_figures(self) -> None:
        op = self.operator()
        for problem in self.problems():
            for config in self.configs(op.space(problem, TARGET), 4):
                full = {**op.defaults, **config}
                assert 0 < op.estimate(problem, full, TARGET) <= 1
                assert all(math.isfinite(v) for v in op.features(problem, full, TARGET).values())

    def test_outputs_on_meta_device_and_reference_shapes(self) -> None:
        if not self.kernels:
            pytest.skip("operator without kernels")
        import torch

        op = self.operator()
        for problem in self.problems():
            outputs = op.make_outputs(problem, torch.device("meta"))
            assert outputs and all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in outputs)
            inputs = op.make_inputs(problem, torch.device("cpu"), torch.Generator().manual_seed(0))
            expected = op.reference(problem, inputs)
            assert [tuple(t.shape) for t in expected] == [tuple(t.shape) for t in outputs]

    # -- nvcc, no GPU --

    @pytest.mark.nvcc
    def test_sampled_configurations_build_for_sm90a(self) -> None:
        if not self.kernels:
            pytest.skip("operator without kernels")
        from tilesearch.builder import LocalBuilder
        from tilesearch.composite import Composite
        from tilesearch.deploy.exporter import as_composite, tensor_specs

        op = self.operator()
        problem = self.problems()[0]
        configs = self.configs(op.space(problem, TARGET), self.builds)
        candidates = [Candidate(op.name, problem.to_dict(), c, TARGET, self.op) for c in configs]
        with LocalBuilder(workers=2, timeout=900) as builder:
            results = [f.result() for f in [builder.submit(c) for c in candidates]]
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        for config in configs:  # from TileLang's cache now: export's view of it must fit make_outputs
            built = op.build(problem, config, TARGET)
            if isinstance(built, Composite) or hasattr(built, "export_library"):  # not a CPU test op's function
                tensor_specs(op, problem, as_composite(op, problem, built))

    # -- GPU --

    @pytest.mark.gpu
    def test_gpu_sampled_configurations_are_correct_at_every_example_size(self) -> None:
        if not self.kernels:
            pytest.skip("operator without kernels")
        from tilesearch.builder import LocalBuilder
        from tilesearch.runner import LocalRunner

        # a correctness check, not a timing: the long limit leaves room for a GPU and CPUs shared
        # with other test processes (under pytest -n 12 one 3 s run here once took over 120 s)
        op, runner = self.operator(), LocalRunner(timeout=600)
        try:
            target = runner.start()
            with LocalBuilder(workers=4, timeout=900) as builder:
                for problem in self.problems():
                    for config in self.configs(op.space(problem, target), 2):
                        build = builder.submit(Candidate(op.name, problem.to_dict(), config, target, self.op)).result()
                        assert build.ok, build.error
                        run = runner.run(build.candidate)
                        assert run.status == Status.OK, (problem, config, run.error)
        finally:
            runner.close()

    @pytest.mark.gpu
    def test_gpu_two_trial_tune(self) -> None:
        if not self.kernels:
            pytest.skip("operator without kernels")
        from tilesearch.tuner import tune

        problem = self.problems()[0]
        result = tune(self.op, problem, storage=":memory:", strategy="random", trials=2, build_workers=2, progress=False)
        assert result.measured_now == 2 and result.best and result.best[0].status == Status.OK.value


def suites(names: Any = None) -> dict[str, type[OperatorSuite]]:
    """One :class:`OperatorSuite` subclass per registered operator (or per name in ``names``),
    named ``TestOperator_<name>``: assign them into a test module's globals to collect them."""
    names = sorted(registry.available()) if names is None else names
    return {f"TestOperator_{name}": type(f"TestOperator_{name}", (OperatorSuite,), {"op": name}) for name in names}
