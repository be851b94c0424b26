"""What a run-time M costs one GEMM configuration: the same configuration compiled for one M and
with M a run-time value (``runtime=("m",)``, what a range's dispatch artifact launches), timed
side by side at that M, each kernel of a split-K composite apart.

A range served 64 rows of 6144x4096 (bfloat16, nt; four H200s, 2026-11-28, ``75dca45``) with a
swapped 32x192 split-K 4 tile whose dispatched kernel was 15.4% slower than the same
configuration compiled for 64 rows; at 29 other held-out sizes the two were within 1%. The
dispatched kernel there went through the exported artifact's wrapper; here both are the op's own
builds, so a gap that remains is the kernels', and the profiler says which of them it is in.

Each case: outputs checked against float64, then ``rounds`` interleaved timings of (compiled for
M, run-time M, ``torch.matmul``) with L2 flushed (``tilesearch.runner.measure.bench``), the
median and spread of the ratio, then 50 runs of each under PyTorch's profiler (GPU time per
kernel). A look, not a result of the search.

``check=1`` first checks split-K tiles on awkward shapes, compiled for M and with M a run-time
value, against float64 (:func:`check_awkward`).

usage: python scripts/dynamic_m_probe.py out=$OUT [cases=all|NAME,...] [rounds=5] [check=1]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

SWAPPED = dict(epilogue="smem", persistent=False, raster="row", swap_ab=True, warp_policy="full_row")
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # (problem, configuration): the range's dispatched configurations at held-out sizes
    "6144x4096_m64": ({"m": 64, "n": 6144, "k": 4096},  # +15.4% dispatched against compiled for 64
                      {**SWAPPED, "block_m": 32, "block_n": 192, "block_k": 128, "num_stages": 2, "panel_size": 16,
                       "split_k": 4, "threads": 128, "tma": False, "warp_specialize": "off"}),
    "4096x14336_m64": ({"m": 64, "n": 4096, "k": 14336},  # +3.3%
                       {**SWAPPED, "block_m": 64, "block_n": 128, "block_k": 128, "num_stages": 4, "panel_size": 0,
                        "split_k": 4, "threads": 256, "tma": True, "warp_specialize": "role_based",
                        "epilogue": "direct"}),
    "4096x14336_m21": ({"m": 21, "n": 4096, "k": 14336},  # +1.4%
                       {**SWAPPED, "block_m": 32, "block_n": 128, "block_k": 128, "num_stages": 5, "panel_size": 0,
                        "split_k": 4, "threads": 256, "tma": True, "warp_specialize": "role_based",
                        "epilogue": "direct"}),
    "4096x4096_m235": ({"m": 235, "n": 4096, "k": 4096},  # -0.1%: a control
                       {"block_m": 128, "block_n": 128, "block_k": 64, "num_stages": 5, "panel_size": 16,
                        "split_k": 2, "threads": 256, "tma": True, "warp_specialize": "on", "epilogue": "smem",
                        "persistent": False, "raster": "row", "swap_ab": False, "warp_policy": "square"}),
}


def kernel_times(fn: Any, runs: int = 50) -> dict[str, float]:
    """GPU microseconds per run of each kernel ``fn`` launches (PyTorch's profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for event in prof.key_averages():
        if event.device_type is not None and "cuda" in str(event.device_type).lower() and event.count:
            total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
            out[event.key[:60]] = round(total / runs, 2)
    return out


def run_case(name: str, problem: dict[str, Any], config: dict[str, Any], rounds: int) -> dict[str, Any]:
    import torch

    from tilesearch import registry
    from tilesearch.runner.measure import MeasureSettings, bench
    from tilesearch.target import detect

    op, target = registry.load("gemm"), detect()
    problem = op.problem(**{**problem, "dtype": "bfloat16", "layout": "nt"})
    static = op.build(problem, config, target)
    dynamic = op.build(problem, config, target, runtime=("m",))
    gen = torch.Generator(device="cuda").manual_seed(problem.to_dict()["m"])
    a, b = op.make_inputs(problem, "cuda", gen)
    outs = [op.make_outputs(problem, "cuda")[0] for _ in range(3)]
    fns = [lambda: static(a, b, outs[0]), lambda: dynamic(a, b, outs[1]), lambda: torch.matmul(a, b.t(), out=outs[2])]
    ref = op.reference(problem, (a, b))[0]
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    errors = [((o.double() - ref).norm() / ref.norm()).item() for o in outs]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ms = [bench(fns, MeasureSettings(), l2) for _ in range(rounds)]
    ratios = sorted(r[1] / r[0] for r in ms)
    return {
        "case": name, "problem": problem.to_dict(), "config": config, "errors": errors,
        "ms": ms, "dynamic_over_static": ratios, "median": statistics.median(ratios),
        "kernels_static": kernel_times(fns[0]), "kernels_dynamic": kernel_times(fns[1]),
    }


AWKWARD = [(17, 33, 65), (1000, 3000, 500), (5, 6144, 4096)]  # (m, n, k), nt; nn as well where not swapped
SPLIT = [  # split-K tiles of the widths a range serves: 128, 192 (swapped) and 64
    dict(block_m=128, block_n=128, block_k=64, num_stages=3, threads=256, panel_size=8, warp_policy="square",
         split_k=4, epilogue="smem", persistent=False, raster="row", swap_ab=False, tma=True, warp_specialize="on"),
    CASES["6144x4096_m64"][1],
    {**CASES["4096x14336_m21"][1], "block_n": 64, "split_k": 2},
]


def check_awkward() -> list[str]:
    """Each split-K tile of :data:`SPLIT` compiled for M and with M a run-time value, on
    :data:`AWKWARD` shapes in both layouts: the output against float64. Returns the failures."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from tilesearch import registry
    from tilesearch.target import detect

    op, target = registry.load("gemm"), detect()
    jobs = []
    for (m, n, k) in AWKWARD:
        for layout in ("nt", "nn") if n == 3000 else ("nt",):
            problem = op.problem(m=m, n=n, k=k, dtype="bfloat16", layout=layout)
            space = op.space(problem, target)
            for config in SPLIT:
                if layout == "nn" and config.get("swap_ab"):
                    continue
                for runtime in ((), ("m",)):
                    jobs.append((problem, config, runtime, space.why_invalid(config)))

    def build(job: Any) -> Any:
        problem, config, runtime, _ = job
        try:
            return op.build(problem, config, target, runtime=runtime)
        except Exception as exc:  # a build that fails is a failure to report, not a crash
            return exc

    with ThreadPoolExecutor(12) as pool:
        kernels = list(pool.map(build, jobs))
    failures = []
    for (problem, config, runtime, why), kernel in zip(jobs, kernels):
        label = f"{problem.to_dict()} {config['block_m']}x{config['block_n']} split {config['split_k']} runtime={runtime}"
        if isinstance(kernel, Exception):
            failures.append(f"{label}: build {type(kernel).__name__}: {str(kernel)[:200]} (space: {why})")
            continue
        gen = torch.Generator(device="cuda").manual_seed(1)
        a, b = op.make_inputs(problem, "cuda", gen)
        out = op.make_outputs(problem, "cuda")[0]
        out.fill_(float("nan"))
        kernel(a, b, out)
        ref = op.reference(problem, (a, b))[0]
        err = ((out.double() - ref).norm() / ref.norm()).item()
        if not err < 2e-2:
            failures.append(f"{label}: error {err:.2e}")
    print(f"awkward split-K shapes: {len(jobs) - len(failures)} of {len(jobs)} correct", flush=True)
    return failures


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    out = Path(args.get("out", "."))
    out.mkdir(parents=True, exist_ok=True)
    names = list(CASES) if args.get("cases", "all") == "all" else args["cases"].split(",")
    rounds = int(args.get("rounds", 5))
    results = []
    for name in names:
        problem, config = CASES[name]
        try:
            results.append(run_case(name, problem, config, rounds))
        except Exception as exc:  # one case's failure must not cost the others
            results.append({"case": name, "error": f"{type(exc).__name__}: {exc}"})
        (out / "dynamic_m_probe.json").write_text(json.dumps(results, indent=1))
        print(json.dumps(results[-1])[:600], flush=True)
    if args.get("check", "0") == "1":
        failures = check_awkward()
        (out / "awkward_failures.json").write_text(json.dumps(failures, indent=1))
        print("\n".join(failures[:20]))
    print(f"\n{'case':18} {'static ms':>10} {'run-time M':>10} {'ratio (min-max)':>22} {'matmul':>8}  errors")
    for r in results:
        if "error" in r:
            print(f"{r['case']:18} {r['error'][:90]}")
            continue
        med = [statistics.median(x[i] for x in r["ms"]) for i in range(3)]
        span = f"{r['median']:.3f} ({r['dynamic_over_static'][0]:.3f}-{r['dynamic_over_static'][-1]:.3f})"
        print(f"{r['case']:18} {med[0]:10.4f} {med[1]:10.4f} {span:>22} {med[2]:8.4f}  "
              + ", ".join(f"{e:.1e}" for e in r["errors"]))
        for label in ("kernels_static", "kernels_dynamic"):
            print(f"    {label[8:]:8} " + "; ".join(f"{k}: {v} us" for k, v in r[label].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
