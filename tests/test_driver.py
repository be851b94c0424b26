"""The GPU's facts read without torch (tilesearch.runner.driver), for the runner's quick start."""

import subprocess
import sys
import time

import pytest

from tilesearch.runner import driver


def test_the_script_reads_nothing_but_the_standard_library():
    # it runs as a script in an isolated interpreter: a package import there would fail, or cost seconds
    done = subprocess.run([sys.executable, "-I", "-S", "-c",
                           f"import runpy, sys; sys.modules['ctypes'] = None; runpy.run_path({driver.__file__!r}, run_name='__main__')"],
                          capture_output=True, text=True, timeout=60)
    assert "import of ctypes halted" in done.stderr  # got as far as the driver, and no further


def test_without_a_driver_or_a_cuda_build_there_are_no_facts(monkeypatch):
    monkeypatch.setattr(driver, "probe", lambda: None)
    assert driver.facts() is None
    monkeypatch.setattr(driver, "probe", lambda: driver.Probe("NVIDIA H100 80GB HBM3", "sm_90a", {"torch_cuda": "none"}))
    assert driver.facts() is None  # a CPU build of torch: the worker could not measure


def test_a_child_that_fails_gives_no_facts(monkeypatch):
    monkeypatch.setattr(driver, "probe", lambda: driver.Probe("NVIDIA H100 80GB HBM3", "sm_90a", {"torch_cuda": "12.8"}))
    monkeypatch.setattr(driver, "__file__", "/nonexistent/driver.py")
    assert driver.facts() is None


@pytest.mark.gpu
def test_the_drivers_facts_are_the_workers():
    from tilesearch.runner.local import LocalRunner

    runner = LocalRunner(device=0)
    runner.driver_fn = None  # the worker reports them
    try:
        target = runner.start()
        worker = {**target.to_dict(), "versions": runner.versions}
    finally:
        runner.close()
    assert driver.facts({"CUDA_VISIBLE_DEVICES": "0"}) == worker


def test_a_worker_measures_on_the_gpu_the_device_index_names_among_the_visible_ones(monkeypatch):
    from tilesearch.runner.base import NoDeviceError
    from tilesearch.runner.local import visible_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_device(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert visible_device(0) == "2" and visible_device(1) == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f1c")  # UUIDs pass through as they are
    assert visible_device(0) == "GPU-8f1c"
    with pytest.raises(NoDeviceError, match="device 1 is not among the 1"):
        visible_device(1)


def test_absent_is_sure_only_without_a_driver_or_without_a_device():
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:  # this machine: no driver, for any environment
        assert "libcuda.so.1 does not load" in driver.absent()
        assert "libcuda.so.1 does not load" in driver.absent({"CUDA_VISIBLE_DEVICES": "0"})
        return
    # a driver: with no device visible it is sure too
    assert "CUDA_ERROR_NO_DEVICE" in (driver.absent({"CUDA_VISIBLE_DEVICES": ""}) or "")


def no_facts(env):
    return None


def no_driver(env):
    return "no CUDA driver here (a test's)"


def test_surely_no_gpu_is_said_before_the_measuring_worker_warms_up():
    from tilesearch.runner.base import NoDeviceError
    from tilesearch.runner.local import LocalRunner

    class Runner(LocalRunner):
        driver_fn = "test_driver:no_facts"
        absent_fn = "test_driver:no_driver"

    runner = Runner(device=0)
    warming = runner._worker
    try:
        # without the check the worker's own start would answer, with the worker's reason
        with pytest.raises(NoDeviceError, match=r"no CUDA GPU to measure on \(no CUDA driver here \(a test's\)\)"):
            runner.start()
        time.sleep(0.5)  # a warm-up thread that had not started the worker yet must not start it now
        assert not warming.alive and not runner._worker.alive
    finally:
        runner.close()
