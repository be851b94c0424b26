"""Workers on one host share compiled kernels through TileLang's disk cache.

Builders compile into ``$TILELANG_CACHE_DIR``; the runner's worker (and any other tuning
process on the host) loads from it. Two processes compiling the same program at once must
leave one sound entry that a third loads without compiling.
"""

import hashlib
import json
import os
import subprocess
import sys

import pytest

BUILD = """
import json, os, sys
from tilesearch.testing.faulty import FaultyOp
from tilesearch.target import Target
op = FaultyOp()
problem = op.problem(n=1 << 20)
config = {"fault": "none", "block": 512, "threads": 128}
if sys.argv[1] == "load-only":
    import tilelang.cache.kernel_cache as kc
    class LoadOnly(kc.JITKernel):
        def __init__(self, *args, from_database=False, **kwargs):
            if not from_database:
                raise AssertionError("compiled instead of loading from the disk cache")
            super().__init__(*args, from_database=True, **kwargs)
    kc.JITKernel = LoadOnly
op.build(problem, config, Target.from_arch("sm_90a"))
if sys.argv[1] == "load-only":
    root = kc.KernelCache()._get_cache_root()
    print(json.dumps(sorted(os.listdir(root))))
"""


def sound(entry):
    """Every file of a cache entry is listed in its manifest with its size and SHA-256."""
    with open(entry / "manifest.json") as f:
        listed = json.load(f)["files"]
    files = {p.name for p in entry.iterdir() if p.name != "manifest.json"}
    return files == set(listed) and all(
        (entry / name).stat().st_size == meta["size"]
        and hashlib.sha256((entry / name).read_bytes()).hexdigest() == meta["sha256"]
        for name, meta in listed.items()
    )


@pytest.mark.nvcc
def test_concurrent_compiles_of_one_program_leave_one_sound_entry_that_loads_without_compiling(tmp_path):
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    racers = [
        subprocess.Popen([sys.executable, "-c", BUILD, "compile"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for proc in racers:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    loaded = subprocess.run([sys.executable, "-c", BUILD, "load-only"], env=env, capture_output=True, text=True,
                            timeout=600)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    entries = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert len(entries) == 1
    (entry,) = (tmp_path / "cache").glob(f"*/*/kernels/{entries[0]}")
    assert sound(entry)
