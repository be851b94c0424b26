"""The operator conformance suite (tilesearch.testing.operators) over every registered operator,
the out-of-tree grouped GEMM included when it is installed, and over the test operators."""

import pytest

from tilesearch import registry
from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.testing.faulty import FAULTY_CPU_OP, FAULTY_OP
from tilesearch.testing.operators import OperatorSuite, suites
from tilesearch.testing.toy import TOY_OP, ToyOp

globals().update(suites())


class TestToyOperator(OperatorSuite):
    op = TOY_OP
    kernels = False


class TestFaultyOperator(OperatorSuite):
    op = FAULTY_OP

    def configs(self, space, n, seed=0):
        return [c for c in super().configs(space, 4 * n, seed) if c["fault"] == "none"][:n] or [
            {"fault": "none", "block": 256, "threads": 128}
        ]


class TestFaultyCpuOperator(TestFaultyOperator):
    op = FAULTY_CPU_OP

    def test_gpu_sampled_configurations_are_correct_at_every_example_size(self):
        pytest.skip("Python kernels on the CPU")

    def test_gpu_two_trial_tune(self):
        pytest.skip("Python kernels on the CPU")


def test_every_registered_operator_has_a_suite():
    assert set(suites()) == {f"TestOperator_{name}" for name in registry.available()}
    assert {"gemm", "einsum_sum"} <= set(registry.available())


class SeededToy(ToyOp):
    """A toy whose parameter is named like a tuning setting."""

    params = (Param("seed", int, minimum=0),)


def test_a_parameter_named_like_a_tuning_setting_is_refused():
    with pytest.raises(registry.OperatorError, match="parameter 'seed' is named like a tuning setting"):
        registry.load(f"{__name__}:SeededToy")
    from tilesearch import tune

    with pytest.raises(registry.OperatorError, match="'seed'"):
        tune(SeededToy(), {"seed": 1}, storage=":memory:", progress=False)
    assert {"seed", "device", "arch", "study", "out", "storage", "trials", "op"} <= registry.reserved()


def test_the_command_line_says_which_parameter_clashes(capsys):
    from tilesearch import cli

    assert cli.main(["tune", f"op={__name__}:SeededToy", "seed=1", "runner=replay:x", "progress=false"]) == 2
    err = capsys.readouterr().err
    assert "parameter 'seed' is named like a tuning setting" in err and len(err.strip().splitlines()) == 1


def test_a_suite_fails_an_operator_that_breaks_its_promises():
    class Broken(ToyOp):
        def tolerance(self, problem: Problem, config) -> Tolerance:
            return Tolerance(0.0, 0.0)

        def space(self, problem, target):
            space = super().space(problem, target)
            space.constraints = (lambda c: "",)  # a constraint that rejects without a reason
            return space

    class Suite(OperatorSuite):
        kernels = False

        def operator(self) -> Operator:
            return Broken()

    with pytest.raises(AssertionError):
        Suite().test_counts_and_tolerance_are_positive()
    with pytest.raises(AssertionError):
        Suite().test_constraints_return_reasons()
