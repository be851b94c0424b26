"""How long a process takes to load compiled kernels from TileLang's cache, as the measuring
worker does for each trial (``worker: load``), with TileLang's frontend as it is and with each
tile-program function rewritten once a process (:mod:`tilesearch.builder.frontend`). Compiles the
configurations into the cache first (on the CPU too: nothing is run), then loads them in
``procs`` fresh processes per variant, alternating, and prints each process's first load and the
median of the rest, in milliseconds.

usage: python scripts/load_probe.py [configs=12] [procs=3] [m=8192] [n=8192] [k=8192] [dtype=float16]"""
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, random, sys, time
import tilelang
from tilesearch import registry
from tilesearch.builder import frontend
from tilesearch.records import Candidate
from tilesearch.target import Target

args = json.loads(sys.argv[1])
if args["variant"] == "as_is":
    frontend.install = lambda: None  # Candidate.build's install does nothing: TileLang's own frontend
op = registry.load("gemm")
target = Target.from_arch("sm_90a")
problem = op.problem(m=args["m"], n=args["n"], k=args["k"], dtype=args["dtype"])
configs = random.Random(5).sample(list(op.space(problem, target).enumerate()), args["configs"])
spent = []
for config in configs:
    began = time.perf_counter()
    Candidate(op="gemm", problem=problem.to_dict(), config=config, target=target).build(op)
    spent.append(time.perf_counter() - began)
print(json.dumps(spent))
"""


def main(argv: list[str]) -> None:
    opts = {"configs": 12, "procs": 3, "m": 8192, "n": 8192, "k": 8192, "dtype": "float16"}
    for arg in argv:
        key, _, value = arg.partition("=")
        if key not in opts:
            raise SystemExit(f"unknown option {key}; {__doc__.splitlines()[-1]}")
        opts[key] = value if key == "dtype" else int(value)

    def run(variant: str) -> list[float]:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps({**opts, "variant": variant})],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    run("with_frontend")  # compiles what the cache lacks
    rows = []
    for i in range(opts["procs"]):
        for variant in ("as_is", "with_frontend"):
            spent = run(variant)
            rows.append((variant, i, 1e3 * spent[0], 1e3 * statistics.median(spent[1:]), 1e3 * sum(spent)))
    print(f"{'variant':<14} {'process':>7} {'first ms':>9} {'rest median ms':>15} {'all ms':>8}")
    for variant, i, first, rest, total in rows:
        print(f"{variant:<14} {i:>7} {first:>9.1f} {rest:>15.1f} {total:>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
