"""The check experiments' shared command line (tilesearch.experiment.checks) and one check end to
end on the CPU: the multi-GPU comparison's dry run on a replay dataset."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilesearch.experiment.checks import Check, main

ROOT = Path(__file__).resolve().parents[1]
SEEN = []


def record(options):
    SEEN.append(options)
    return 3


CHECK = Check(name="probe", work="test_checks:record",
              options={"parts": "a,b", "trials": 8, "timeout": 1.5, "skip": False, "storage": None})


def test_options_take_the_command_line_in_either_spelling_converted_to_the_defaults_types(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    SEEN.clear()
    code = main(CHECK, [f"out={tmp_path / 'o'}", "--trials", "4", "--timeout=2", "skip=yes", "storage=sqlite:///x.db"])
    assert code == 3 and (tmp_path / "o").is_dir()
    (got,) = SEEN
    assert (got.parts, got.trials, got.timeout, got.skip, got.storage) == ("a,b", 4, 2.0, True, "sqlite:///x.db")


@pytest.mark.parametrize("argv, says", [(["trails=4"], "unknown key 'trails'"), (["trials=four"], "must be a int"),
                                        (["skip=maybe"], "must be true or false"), (["trials"], "not key=value")])
def test_bad_input_is_exit_2_and_one_line_and_nothing_runs(argv, says, capsys, tmp_path):
    SEEN.clear()
    assert main(CHECK, [f"out={tmp_path}", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and not SEEN


def test_multi_gpu_dry_run_on_a_replay_dataset_measures_each_configuration_once_in_both_runs(tmp_path):
    data = ROOT / "experiments/data/gemm_4096x4096x4096_float16_nn_h100_80gb_hbm3.jsonl.gz"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run([sys.executable, "experiments/multi_gpu.py", f"out={tmp_path}", "size=4096",
                           f"runner=replay:{data}"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert not list(scratch.iterdir())  # the cold runs' compile caches are removed
    summary = json.loads((tmp_path / "multi_gpu.json").read_text())
    runs = summary["runs"]
    assert runs["one"]["measured"] == runs["two"]["measured"] == summary["trials"] == 48
    assert runs["one"]["measured_twice"] == runs["two"]["measured_twice"] == 0
    assert summary["quality"]["same_config"]
    assert "DRY RUN" in done.stdout and done.stdout.strip().splitlines()[-1].startswith("  same configuration: True")


def test_multi_gpu_refuses_an_unknown_order_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "experiments/multi_gpu.py", f"out={tmp_path}", "order=sideways"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "multi_gpu: order=sideways: use one of two-first, one-first"]


@pytest.mark.nvcc
def test_compile_time_compares_batches_and_checks_their_kernels(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run([sys.executable, "experiments/compile_time.py", f"out={tmp_path}", "configs=3", "batch=1,3",
                           "m=1000", "n=768", "k=320"], capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "TMPDIR": str(scratch), "TILESEARCH_COMPILER": "nvcc"})  # nvcc's batches
    assert done.returncode == 0, done.stderr[-2000:]
    assert not list(scratch.iterdir())  # each variant's compile cache is removed once compared
    alone, together = json.loads((tmp_path / "compile_time.json").read_text())["variants"]
    assert (alone["batch"], together["batch"]) == (1, 3)
    for variant in (alone, together):
        assert not variant["failed"] and variant["identical"] == [3, 3]  # each kernel as the first variant made it
        assert all(0 < row["tools_s"] and 0 < row["compile_s"] for row in variant["rows"])
    assert all(0 < row["tools_s"] < row["compile_s"] for row in alone["rows"])
    assert done.stdout.strip().splitlines()[-1].startswith("batch 3: ")


def test_compile_time_refuses_batches_under_nvrtc_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "experiments/compile_time.py", f"out={tmp_path}", "batch=1,3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "TILESEARCH_COMPILER": "nvrtc"})
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "compile_time: batch=1,3: batches are nvcc's; run with TILESEARCH_COMPILER=nvcc, or batch=1 for NVRTC"]
    assert not list(tmp_path.iterdir())  # refused before anything is compiled or written


def test_an_empty_tilelang_cache_lasts_one_step_and_the_variable_comes_back(monkeypatch):
    from tilesearch.experiment.cache import empty_tilelang_cache

    monkeypatch.setenv("TILELANG_CACHE_DIR", "/somewhere/else")
    with empty_tilelang_cache("step") as folder:
        assert os.environ["TILELANG_CACHE_DIR"] == folder and os.path.isdir(folder) and not os.listdir(folder)
        open(os.path.join(folder, "kernel.so"), "w").close()
    assert not os.path.exists(folder) and os.environ["TILELANG_CACHE_DIR"] == "/somewhere/else"
    monkeypatch.delenv("TILELANG_CACHE_DIR")
    with empty_tilelang_cache("step"):
        pass
    assert "TILELANG_CACHE_DIR" not in os.environ
