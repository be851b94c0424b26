from importlib.metadata import EntryPoint

import pytest

from tilesearch import registry
from tilesearch.op import Operator, ProblemError


def test_gemm_is_found_through_entry_points():
    assert registry.available()["gemm"] == "search_spaces.gemm:GemmOp"
    op = registry.load("gemm")
    assert isinstance(op, Operator) and op.name == "gemm"


def test_third_party_entry_point(monkeypatch):
    fake = [EntryPoint(name="toy", value="tilesearch.testing.toy:ToyOp", group=registry.GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: fake if group == registry.GROUP else [])
    registry.available.cache_clear()
    try:
        assert registry.available() == {"toy": "tilesearch.testing.toy:ToyOp"}
        assert registry.load("toy").name == "toy"
    finally:
        registry.available.cache_clear()


def test_import_path_and_unknown_names():
    assert registry.load("tilesearch.testing.toy:ToyOp").name == "toy"
    with pytest.raises(registry.UnknownOperatorError, match="registered ops: .*gemm"):
        registry.load("nosuchop")


def test_problem_validation():
    op = registry.load("gemm")
    p = op.problem(m="8", n=16, k=32)
    assert p.key == "m=8,n=16,k=32,dtype=float16,layout=nn"
    with pytest.raises(ProblemError, match="needs k"):
        op.problem(m=1, n=1)
    with pytest.raises(ProblemError, match=">= 1"):
        op.problem(m=0, n=1, k=1)
    with pytest.raises(ProblemError, match="not an integer"):
        op.problem(m="x", n=1, k=1)
    with pytest.raises(ProblemError, match="not one of"):
        op.problem(m=1, n=1, k=1, dtype="float32")


def test_tune_takes_an_unregistered_operator_instance():
    # regression: tune(op=<instance>) looked the op's name up in the registry, where "toy" is not
    from tilesearch import tune
    from tilesearch.testing.synthetic import SyntheticRunner
    from tilesearch.testing.toy import ToyOp

    assert "toy" not in registry.available()
    runner = SyntheticRunner()
    result = tune(ToyOp(), {"size": 64}, runner=runner, storage=":memory:", trials=3, progress=False)
    assert result.measured_now == 3
    assert {c.op_ref for c in runner.calls} == {"tilesearch.testing.toy:ToyOp"}
    assert registry.ref(registry.load("gemm")) == "gemm"


def test_an_operator_class_workers_cannot_import_is_refused():
    from tilesearch.testing.toy import ToyOp

    class Local(ToyOp):
        pass

    with pytest.raises(registry.OperatorError, match="cannot import it"):
        registry.ref(Local())
