"""The measuring worker times the kernel the builder compiled: a candidate's run-time parameters
(a range's studies, ``runtime=m``) reach its operator's ``build`` in the search's measurement and
in the final re-time. Without them the worker compiled a kernel for the exact size, which TileLang's
cache did not hold (a range's sizes waited a median 42.9 s for measurement instead of 1.8 s, on four
H200s), and the range timed another kernel than the one it dispatches."""

import pytest

from tilesearch.records import Candidate
from tilesearch.runner.measure import MeasureSettings, measure, measure_together
from tilesearch.target import Target


class Built(Exception):
    """Raised by the probe operator's build, with the run-time parameters it was given."""


class ProbeOp:
    name = "gemm"

    def build(self, problem, config, target, runtime=()):
        raise Built(runtime)


@pytest.fixture
def candidate(monkeypatch):
    monkeypatch.setattr(Candidate, "load_op", lambda self: ProbeOp())
    return Candidate("gemm", dict(m=235, n=4096, k=4096), {"block_m": 64}, Target.from_arch("sm_90a"),
                     runtime=("m",))


def test_the_search_measures_the_run_time_kernel(candidate):
    with pytest.raises(Built) as built:
        measure(candidate, MeasureSettings())
    assert built.value.args == (("m",),)


def test_the_final_re_time_measures_the_run_time_kernel(candidate, monkeypatch):
    import torch

    from tilesearch.runner import measure as measuring

    # no GPU here: the inputs, their copies and the spacer ahead of them stay on the CPU
    monkeypatch.setattr(torch, "device", lambda *a, **k: "cpu")
    monkeypatch.setattr(torch, "empty", lambda *a, **k: None)
    monkeypatch.setattr(measuring, "Placements", lambda inputs, seed: None)
    op = ProbeOp()
    op.make_inputs = lambda problem, device, generator: ()
    op.reference = lambda problem, inputs: ()
    monkeypatch.setattr(Candidate, "load_op", lambda self: op)
    with pytest.raises(Built) as built:
        measure_together([candidate], MeasureSettings())
    assert built.value.args == (("m",),)
