"""Two published GEMM studies, redone with tilesearch on one GPU (float16).

- ``swizzle``: a TileLang user's rasterization study. M=N=K from 12288 to 20480 in steps of 1024,
  block 128x128x32, 3 stages, 128 threads, swizzle off / panel 10 / panel 20; then the same sizes
  with every knob tuned (``tuned_sizes=``, default all).
- ``pipelining``: tilus's tutorial workloads 4096x4096x4096 and 1024x1024x14336, num_stages 1 to 5
  at fixed tiles (128x128x64, 128 threads, panel 8, square), then fully tuned.

Each study is two experiments on the shared runner: the fixed-tile sweep (``grid`` over the
listed values; every configuration of a problem re-timed together beside ``torch.matmul``), and
the tuned search (``xgb``, ``trials`` trials; its top re-timed beside ``torch.matmul``). Writes
``<study>_fixed.*`` and ``<study>_tuned.*`` (JSON, table, PNG of TFLOP/s against the size, log)
under ``out``.

usage: python experiments/gemm_studies.py out=$OUT [studies=swizzle,pipelining] [trials=16] [tuned_sizes=12288,16384]
"""

import sys
from dataclasses import replace

from tilesearch.experiment import Experiment, ExperimentError, main
from tilesearch.experiment.cli import pairs

BASE = dict(block_m=(128,), block_n=(128,), block_k=(32,), num_stages=(3,), threads=(128,), panel_size=(0,),
            warp_policy=("square",))
SIZES = tuple(range(12288, 20480 + 1, 1024))


def cube(size: int) -> dict:
    return {"m": size, "n": size, "k": size, "dtype": "float16", "layout": "nn"}


STUDIES = {
    "swizzle": Experiment(
        name="swizzle_fixed", op="gemm", problems=tuple(cube(s) for s in SIZES), strategies=("grid",), trials=3,
        knobs={**BASE, "panel_size": (0, 10, 20)}, top=3, peers=("torch",), x="m",
        title="rasterization swizzle at fixed tiles (128x128x32, 3 stages)"),
    "pipelining": Experiment(
        name="pipelining_fixed", op="gemm", problems=(cube(4096), {**cube(1024), "k": 14336}), strategies=("grid",),
        trials=5, knobs={**BASE, "block_k": (64,), "panel_size": (8,), "num_stages": (1, 2, 3, 4, 5)}, top=5,
        peers=("torch",), title="software pipelining at fixed tiles (128x128x64)"),
}


def tuned(fixed: Experiment, sizes: set[int] | None, trials: int) -> Experiment:
    """The same problems (those of ``sizes``, if given) with every knob searched."""
    problems = tuple(p for p in fixed.problems if sizes is None or p["m"] in sizes)
    return replace(fixed, name=fixed.name.replace("fixed", "tuned"), problems=problems, strategies=("xgb",),
                   trials=trials, knobs=None, top=3, title=fixed.title.split(" at ")[0] + ", every knob tuned")


def plan(argv: list[str]) -> tuple[list[Experiment], list[str]]:
    """The experiments that ``studies=``, ``trials=`` and ``tuned_sizes=`` ask for, and the
    other arguments (for every experiment)."""
    given = dict(pairs(argv))
    studies = given.pop("studies", "swizzle,pipelining").split(",")
    unknown = [s for s in studies if s not in STUDIES]
    if unknown:
        raise ExperimentError(f"unknown study {unknown[0]!r}; use some of {', '.join(STUDIES)}")
    try:
        trials = int(given.pop("trials", 16))
        text = given.pop("tuned_sizes", "all")
        sizes = None if text == "all" else {int(s) for s in text.split(",")}
    except ValueError as e:
        raise ExperimentError(f"trials and tuned_sizes take integers ({e})") from None
    return [e for s in studies for e in (STUDIES[s], tuned(STUDIES[s], sizes, trials))], \
        [f"{k}={v}" for k, v in given.items()]


if __name__ == "__main__":
    try:
        experiments, rest = plan(sys.argv[1:])
    except ExperimentError as e:
        sys.exit(print(f"gemm_studies.py: {e}", file=sys.stderr) or 2)
    sys.exit(max(main(experiment, rest) for experiment in experiments))
