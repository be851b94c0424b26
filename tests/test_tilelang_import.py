"""tilesearch.tilelang_import: TileLang imported without ml_dtypes makes the same kernels, compiles
and loads them without importing ml_dtypes later, and leaves ml_dtypes importable afterwards; the
compile pool's fork server and the measuring worker import it that way."""

import json
import os
import subprocess
import sys

import pytest

PROBLEMS = [
    ("gemm", {"m": 2048, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"}),
    ("gemm", {"m": 1000, "n": 3000, "k": 500, "dtype": "float16"}),
    ("gemm", {"m": 8192, "n": 8192, "k": 1024, "dtype": "bfloat16", "layout": "nt"}),
    ("einsum_sum", {"t": 1024, "k": 1024, "h": 4, "d": 64, "out_dtype": "bfloat16"}),
]

# Lowers 3 sampled configurations of each problem (their CUDA source hashed); with ``hidden``,
# TileLang is imported by import_tilelang, and one configuration is then compiled and loaded again.
SCRIPT = r"""
import hashlib, json, random, sys
hidden = sys.argv[2] == "hidden"
if hidden:
    from tilesearch.tilelang_import import import_tilelang
    import_tilelang()
    after_import = "ml_dtypes" in sys.modules
else:
    import tilelang
import tvm
from tilelang.engine.lower import lower
from tilesearch import registry
from tilesearch.target import Target

target = Target.from_arch("sm_90a")
sources = []
for name, raw in json.loads(sys.argv[1]):
    op = registry.load(name)
    problem = op.problem(**raw)
    space = op.space(problem, target)
    rng = random.Random(5)
    for _ in range(3):
        config = space.sample(rng)
        with tvm.transform.PassContext(config=op.pass_configs(problem, config) or {}), tvm.target.Target(target.tvm()) as t:
            code = lower(op.program(problem, config, target), target=t).kernel_source
        sources.append(hashlib.sha256(code.encode()).hexdigest())
out = {"sources": sources}
if hidden:
    from tilesearch.builder import compiler
    from tilesearch.records import Candidate
    compiler.install()
    op = registry.load("gemm")
    problem = op.problem(m=256, n=256, k=256, dtype="float16")
    config = op.space(problem, target).sample(random.Random(1))
    candidate = Candidate("gemm", problem.to_dict(), config, target)
    candidate.build(op)  # compiled into TileLang's cache (its export imports tvm.contrib.tvmjs)
    candidate.build(op)  # loaded from it
    out.update(after_import=after_import, after_build="ml_dtypes" in sys.modules)
    try:
        import ml_dtypes
        out["importable"] = True
    except ImportError:
        out["importable"] = False
print(json.dumps(out))
"""


def _run(mode, tmp_path):
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / mode))
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(PROBLEMS), mode], capture_output=True, text=True,
                         timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tilelang_without_ml_dtypes_makes_the_same_kernels_and_never_imports_it_after(tmp_path):
    pytest.importorskip("ml_dtypes")  # else there is nothing to hide
    plain, hidden = _run("plain", tmp_path), _run("hidden", tmp_path)
    assert len(plain["sources"]) == len(hidden["sources"]) == 3 * len(PROBLEMS)
    # TileLang itself lowers a configuration to one of two sources now and then on a loaded machine
    # (its prover's time limits: 1 of 6 plain runs of the same 8192x8192x1024 configuration differed
    # beside 4 busy processes on the CPU machine), in either mode: a CI run's hidden run made one
    # that two more plain runs did not. So while a configuration's sources in the two modes share
    # none, both modes are run again, twice at most: a change that hiding ml_dtypes made would
    # keep them apart in every run
    seen = {mode: [{source} for source in run["sources"]] for mode, run in (("plain", plain), ("hidden", hidden))}

    def apart():
        return [i for i, (p, h) in enumerate(zip(seen["plain"], seen["hidden"])) if not p & h]

    for _ in range(2):
        if not apart():
            break
        for mode in seen:
            for i, source in enumerate(_run(mode, tmp_path)["sources"]):
                seen[mode][i].add(source)
    assert not apart(), f"configurations lowered apart with and without ml_dtypes: {apart()}"
    assert hidden["after_import"] is False
    assert hidden["after_build"] is False  # a compile and a load did not import it either
    assert hidden["importable"] is True  # for a plugin that uses it


def _printed(script):
    """What a fresh Python process running ``script`` printed, word by word."""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def test_an_import_of_ml_dtypes_before_is_kept():
    pytest.importorskip("ml_dtypes")
    assert _printed("import sys, ml_dtypes\n"
                    "from tilesearch.tilelang_import import import_tilelang\n"
                    "import_tilelang()\n"
                    "print(sys.modules['ml_dtypes'] is ml_dtypes, 'tilelang' in sys.modules)") == ["True", "True"]


def test_the_fork_server_and_the_measuring_worker_import_tilelang_this_way():
    assert _printed("import sys\n"
                    "import tilesearch.builder.warm\n"
                    "fork_server = 'ml_dtypes' in sys.modules\n"
                    "from tilesearch.runner import measure\n"
                    "measure.warm_up()\n"
                    "print(fork_server, 'ml_dtypes' in sys.modules)") == ["False", "False"]
