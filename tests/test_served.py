"""A finished study is served without starting the runner; anything unsure takes the usual path."""

import pytest

from tilesearch import served, versions
from tilesearch.runner import driver
from tilesearch.runner.local import LocalRunner
from tilesearch.space import Categorical, Space
from tilesearch.testing.cpu import CpuRunner
from tilesearch.testing.faulty import FAULTY_CPU_OP
from tilesearch.tuner import tune

SPACE = Space([Categorical("fault", ("none",)), Categorical("block", (256, 512)), Categorical("threads", (128,))])
PROBLEM = {"n": 1 << 12}


class GpuLikeCpuRunner(CpuRunner):
    """The CPU runner's studies, named as a GPU runner's are (no ``replay:``)."""

    replayed = False


class Started(Exception):
    pass


def as_worker_reports(**changed):
    """What the CPU runner's worker reports (tilesearch.testing.cpu.device_info), as a probe."""
    return served.Probe("cpu", "sm_90a", {**versions.collect(), **changed})


@pytest.fixture
def finished(tmp_path, monkeypatch):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with GpuLikeCpuRunner(timeout=60) as runner:
        first = tune(FAULTY_CPU_OP, PROBLEM, space=SPACE, runner=runner, strategy="grid", trials=2, retime=2,
                     storage=storage, progress=False)
    assert first.measured_now == 2 and first.final is not None

    def no_worker(self):
        raise Started

    monkeypatch.setattr(LocalRunner, "start", no_worker)  # the usual path would start one
    return storage, first


def test_a_finished_study_is_served_without_the_runner(finished, monkeypatch):
    storage, first = finished
    monkeypatch.setattr(served, "probe", as_worker_reports)
    again = tune(FAULTY_CPU_OP, PROBLEM, trials=2, retime=2, storage=storage, progress=False)
    assert again.study == first.study and again.measured_now == 0 and again.target == first.target
    assert again.final == first.final and [r.number for r in again.best] == [r.number for r in first.best]
    assert list(again.phases) == ["study served"]


@pytest.mark.parametrize("why", ["more trials", "other driver", "no probe", "trials in flight"])
def test_anything_unsure_takes_the_usual_path(finished, monkeypatch, why):
    storage, first = finished
    found = as_worker_reports(driver="999.1") if why == "other driver" else as_worker_reports()
    monkeypatch.setattr(served, "probe", lambda: None if why == "no probe" else found)
    if why == "trials in flight":
        from tilesearch.database import TuningDatabase

        db = TuningDatabase(storage, first.study)
        db.study.ask().set_user_attr("key", "measured elsewhere")  # as another tuning process's running trial
        db.close()
    with pytest.raises(Started):
        tune(FAULTY_CPU_OP, PROBLEM, trials=3 if why == "more trials" else 2, retime=2, storage=storage, progress=False)


def test_torch_cuda_is_read_without_importing_torch():
    import torch

    assert driver.torch_cuda() == (torch.version.cuda or "none")


def test_without_nvml_or_a_gpu_there_is_no_probe():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU host: NVML answers")
    assert served.probe() is None
