"""NVRTC's automatic precompiled headers go to a folder of the process's own, which goes with it
or, when it was killed, with the next process that makes a header (tilesearch.builder.pch)."""

import os
import subprocess
import sys
import tempfile

import pytest

from tests.test_compiler import needs_nvrtc
from tilesearch.builder import pch


@pytest.fixture
def tmp(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pch, "_folder", pch._UNTAKEN)
    return tmp_path


def _ended_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_the_folder_follows_pch_and_is_the_processs_own(tmp):
    given = ["--gpu-architecture=sm_90a", "-std=c++20", "-pch", "-Ifoo"]
    named = pch.options(given)
    own = os.path.join(tmp, f"tilesearch-pch-{os.getuid()}", str(os.getpid()))
    assert named == ["--gpu-architecture=sm_90a", "-std=c++20", "-pch", f"-pch-dir={own}", "-Ifoo"]
    assert os.path.isdir(own) and pch.options(named) == named and pch.options(given) == named
    assert pch.options(["-std=c++20"]) == ["-std=c++20"]  # no automatic headers: no folder


def test_a_folder_left_by_an_earlier_process_of_the_same_pid_is_emptied(tmp):
    own = os.path.join(pch.root(), str(os.getpid()))
    os.makedirs(own)
    with open(os.path.join(own, "kernel_0.pch"), "w") as f:
        f.write("another NVRTC's heap")
    assert pch.folder() == own and os.listdir(own) == []


def test_sweep_removes_the_folders_of_ended_processes_only(tmp):
    ended, running = _ended_pid(), os.getppid()
    for name in (str(ended), str(running), "notes"):
        os.makedirs(os.path.join(pch.root(), name))
    assert pch.sweep() == [os.path.join(pch.root(), str(ended))]
    assert sorted(os.listdir(pch.root())) == sorted([str(running), "notes"])


def test_no_folder_where_none_can_be_made_and_nvrtc_keeps_its_own(tmp):
    with open(pch.root(), "w"):
        pass  # a file where the folder would be
    assert pch.folder() is None and pch.options(["-pch"]) == ["-pch"]


MAKE_HEADER = """
import os, sys
import tilelang
from tilesearch.builder import compiler
compiler.nvrtc_cubin(compiler.header_code("sm_90a"), compiler.options_for("sm_90a"))
print(os.getpid(), flush=True)
if sys.argv[1] == "killed":
    os._exit(0)  # as a compile-pool worker ends: no atexit, no NVRTC clean-up
"""


@needs_nvrtc
def test_a_header_left_by_a_killed_process_goes_with_the_next_header_and_a_normal_exit_takes_its_own(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))

    def run(how: str) -> int:
        done = subprocess.run([sys.executable, "-c", MAKE_HEADER, how], env=env, capture_output=True, text=True,
                              timeout=300, cwd=os.path.dirname(os.path.dirname(__file__)))
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    root = tmp_path / f"tilesearch-pch-{os.getuid()}"
    killed = run("killed")
    assert [p.suffix for p in (root / str(killed)).iterdir()] == [".pch"]  # the header, in its folder
    assert not [p for p in os.listdir("/tmp") if p.startswith(f"__nvrtc_auto_pch_{killed}_")]
    assert not [p for p in os.listdir(tmp_path) if p.startswith("__nvrtc_auto_pch_")]
    run("exits")
    assert list(root.iterdir()) == []  # the killed one's swept as the header was made, its own at exit
