"""tilesearch.builder.frontend: the tile programs made with each function rewritten once are the
programs TileLang makes without it, for configurations that take every value of every knob, on
every registered operator's examples and on larger GEMM problems whose spaces hold other programs
(clusters, swapped tiles, split-K, a run-time M)."""

import json
import subprocess
import sys

PROBLEMS = [
    ("gemm", {"m": 8192, "n": 8192, "k": 8192, "dtype": "float16"}, ()),
    ("gemm", {"m": 2048, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"}, ()),
    ("gemm", {"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"}, ()),
    ("gemm", {"m": 1000, "n": 3000, "k": 500, "dtype": "float16"}, ()),
    ("gemm", {"m": 8192, "n": 8192, "k": 1024, "dtype": "bfloat16", "layout": "nt"}, ()),
    ("gemm", {"m": 4096, "n": 4096, "k": 4096, "dtype": "float16"}, ("m",)),
    ("einsum_sum", {"t": 1024, "k": 1024, "h": 4, "d": 64}, ()),
    ("einsum_sum", {"t": 1024, "k": 1024, "h": 4, "d": 64, "out_dtype": "bfloat16"}, ()),
]

SCRIPT = r"""
import hashlib, json, random, sys
import tilelang
from tilesearch import registry
from tilesearch.builder import frontend
from tilesearch.target import Target

problems = json.loads(sys.argv[1])
for name in sorted(registry.available()):  # every operator's own examples, plugins' too
    problems += [(name, dict(example), ()) for example in registry.load(name).examples]
target = Target.from_arch("sm_90a")
made = []
for name, raw, runtime in problems:
    op = registry.load(name)
    problem = op.problem(**raw)
    space = op.space(problem, target)
    configs = list(space.enumerate())
    rng = random.Random(0)
    chosen = {}
    for knob in space.knobs:  # a configuration for every value of every knob, where one is valid
        for value in knob.values():
            having = [c for c in configs if c.get(knob.name) == value]
            if having:
                c = rng.choice(having)
                chosen[json.dumps(c, sort_keys=True)] = c
    extra = {"runtime": tuple(runtime)} if runtime else {}
    made.append((name, raw, runtime, list(chosen.values()), op, problem, extra))

def scripts():
    out = []
    for name, raw, runtime, configs, op, problem, extra in made:
        for c in configs:
            out.append(hashlib.sha256(str(op.program(problem, c, target, **extra)).encode()).hexdigest())
    return out

before = scripts()
frontend.install()
first = scripts()   # each function rewritten once, then reused
again = scripts()   # every function reused
print(json.dumps({"before": before, "first": first, "again": again, "counts": frontend.counts()}))
"""


def test_programs_are_those_tilelang_makes_without_the_kept_rewrites():
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(PROBLEMS)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(found["before"]) > 8 * len(PROBLEMS)  # (the examples add more)
    assert found["first"] == found["before"] and found["again"] == found["before"]
    counts = found["counts"]
    # the rewrites were reused, not made again for each configuration
    assert counts["reused"] > 10 * counts["rewritten"] > 0, counts
