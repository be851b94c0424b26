"""One study tuned by 2 workers, one per GPU, against 1 worker on the same trials (2-GPU machine).

Both runs search the same GEMM sub-space exhaustively (grid over its valid configurations), each
compiling from an empty TileLang cache with the same total number of compile processes, so
that they measure the same configurations and must find the same best. Reported: wall time of
each, trials per minute, what each worker did, configurations measured twice (must be 0), and
the quality of the two bests: both re-timed interleaved in one process on GPU 0 (median of CUDA
events, L2 flushed, checked against float64 first), beside torch.matmul.

Writes the studies to ``$OUT/multi_gpu.db`` and ``$OUT/multi_gpu.json``; prints a table last.
Takes about 3 minutes on 2 H200s with 32 cores (an estimate: 48 configurations, two runs).

The work of ``experiments/multi_gpu.py``.
"""

import json
import sys
import time
from contextlib import ExitStack, nullcontext
from pathlib import Path

from tilesearch.experiment.cache import empty_tilelang_cache

KNOBS = {  # 48 valid configurations of the GEMM space
    "block_m": (128, 256), "block_n": (128, 256), "block_k": (64,), "num_stages": (2, 3, 4),
    "threads": (128, 256), "panel_size": (0, 8), "warp_policy": ("square", "full_row"),
    # the knobs added later, pinned to the plain template's kernel
    "split_k": (1,), "persistent": (False,), "epilogue": ("direct",), "tma": (True,), "warp_specialize": ("on",),
}


def retime(problem, configs, arch):
    """In a runner worker on GPU 0: checks each config against float64, then times all of them
    and torch.matmul interleaved. Returns [latency_ms of each config..., torch's]."""
    import torch

    from tilesearch import registry
    from tilesearch.runner.measure import MeasureSettings, bench, check
    from tilesearch.target import Target, detect

    op = registry.load("gemm")
    prob = op.problem(**problem)
    target = Target.from_arch(arch)
    kernels = [op.build(prob, c, target) for c in configs]
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = op.make_inputs(prob, torch.device("cuda"), gen)
    refs = op.reference(prob, inputs)
    fns = []
    for config, kernel in zip(configs, kernels):
        out = op.make_outputs(prob, torch.device("cuda"))
        _, _, why = check(kernel, inputs, out, refs, op.tolerance(prob, config))
        if why:
            raise RuntimeError(f"{config}: {why}")
        fns.append(lambda kernel=kernel, out=out: kernel(*inputs, *out))
    fns.append(op.baseline(prob, inputs))
    return bench(fns, MeasureSettings(rep_ms=1000, max_reps=1000), detect().l2_bytes)


def run_two(args, storage, cores):
    from tilesearch.distributed import tune_parallel
    from tilesearch.tuner import TuneSettings

    settings = TuneSettings(strategy="grid", trials=args.trials, storage=storage, study="two-workers",
                            build_workers=cores // 2, progress=False, runner=args.runner)
    start = time.perf_counter()
    result = tune_parallel("gemm", args.problem, gpus=[0, 1], settings=settings, knobs=KNOBS)
    wall = time.perf_counter() - start
    workers = [{"gpu": w.gpu, "error": w.error, "measured": w.result.measured_now if w.result else 0,
                "statuses": w.result.statuses if w.result else {}, "wall_s": w.result.wall_s if w.result else None}
               for w in result.processes]
    return {"wall_s": wall, "workers": workers, "study": result.study}


def run_one(args, storage, cores):
    import tilesearch
    from tilesearch.dataset import narrow
    from tilesearch.registry import load
    from tilesearch.target import Target
    from tilesearch.tuner import TuneSettings

    op = load("gemm")
    space = narrow(op.space(op.problem(**args.problem), Target.from_arch("sm_90a")), KNOBS)
    start = time.perf_counter()
    result = tilesearch.tune("gemm", args.problem, space=space, strategy="grid", trials=args.trials, storage=storage,
                             study="one-worker", build_workers=cores, device=0, progress=False,
                             settings=TuneSettings(runner=args.runner))  # tune(runner=) takes a Runner object
    wall = time.perf_counter() - start
    return {"wall_s": wall, "workers": [{"gpu": 0, "error": None, "measured": result.measured_now,
                                          "statuses": result.statuses, "wall_s": result.wall_s}],
            "study": result.study}


def prefill(args, cores):
    """Compiles every configuration into the TileLang cache that both runs then share."""
    from tilesearch.builder import LocalBuilder
    from tilesearch.dataset import narrow
    from tilesearch.records import Candidate
    from tilesearch.registry import load
    from tilesearch.target import Target

    op, target = load("gemm"), Target.from_arch("sm_90a")
    problem = op.problem(**args.problem)
    configs = list(narrow(op.space(problem, target), KNOBS).enumerate())
    start = time.perf_counter()
    with LocalBuilder(cores, timeout=600) as builder:
        built = [f.result() for f in [builder.submit(Candidate("gemm", problem.to_dict(), c, target)) for c in configs]]
    print(f"[prefill] {sum(b.ok for b in built)} of {len(configs)} compiled in {time.perf_counter() - start:.0f} s",
          flush=True)


def study_facts(storage, name):
    import collections

    from tilesearch import TuningDatabase

    db = TuningDatabase(storage, name)
    measured = [r for r in db.records()
                if r.duplicate_of is None and r.status not in ("invalid", "interrupted", "running")]
    keys = collections.Counter(r.key for r in measured)
    yields = sum(1 for r in db.records() if r.duplicate_of is not None)
    best = db.best(1)[0]
    return {"measured": len(measured), "measured_twice": sum(n > 1 for n in keys.values()), "yields": yields,
            "best_config": best.config, "best_ms_in_study": best.latency_ms, "best_tflops_in_study": best.tflops,
            "ok": sum(r.status == "ok" for r in measured)}


def compare(args):
    """Two workers against one on the study of ``args.size``; writes under ``args.out``."""
    for key, allowed in (("order", ("two-first", "one-first")), ("cache", ("cold", "warm"))):
        if getattr(args, key) not in allowed:
            print(f"multi_gpu: {key}={getattr(args, key)}: use one of {', '.join(allowed)}", file=sys.stderr)
            return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.problem = {"m": args.size, "n": args.size, "k": args.size, "dtype": "float16"}

    from tilesearch.builder.local import usable_cores
    from tilesearch.dataset import narrow
    from tilesearch.registry import load
    from tilesearch.runner import LocalRunner
    from tilesearch.target import Target

    op = load("gemm")
    args.trials = narrow(op.space(op.problem(**args.problem), Target.from_arch("sm_90a")), KNOBS).count_valid()
    cores = max(2, usable_cores() - 2)
    storage = f"sqlite:///{out / 'multi_gpu.db'}"
    runs = {}
    order = ("two", "one") if args.order == "two-first" else ("one", "two")
    with ExitStack() as warm:  # warm: one cache that both runs share; cold: each run's own, empty
        if args.cache == "warm":
            warm.enter_context(empty_tilelang_cache("warm"))
            prefill(args, cores)
        for name in order:
            with empty_tilelang_cache(f"{name}-workers") if args.cache == "cold" else nullcontext():
                runs[name] = (run_two if name == "two" else run_one)(args, storage, cores)
            runs[name].update(study_facts(storage, runs[name]["study"]))
            print(f"[{name}] {json.dumps(runs[name], default=str)}", flush=True)

    bests = [runs["two"]["best_config"], runs["one"]["best_config"]]
    if args.runner == "local":
        runner = LocalRunner(device=0, timeout=600)
        runner.start()
        try:
            times = runner.call("tilesearch.experiment.multi_gpu:retime", args.problem, bests, "sm_90a", timeout=600)
        finally:
            runner.close()
    else:  # dry run: the studies' own (replayed) figures, no torch.matmul
        times = [runs["two"]["best_ms_in_study"], runs["one"]["best_ms_in_study"], float("nan")]
    flops = 2.0 * args.size**3
    quality = {"two_best_ms": times[0], "one_best_ms": times[1], "torch_ms": times[2],
               "two_over_one": times[0] / times[1], "same_config": bests[0] == bests[1]}
    summary = {"problem": args.problem, "knobs": KNOBS, "trials": args.trials, "compile_processes": cores, "cache": args.cache,
               "order": order, "runs": runs, "quality": quality}
    (out / "multi_gpu.json").write_text(json.dumps(summary, indent=2, default=str))

    replayed = "" if args.runner == "local" else f" [DRY RUN, {args.runner}: no measurements]"
    print(f"\nGEMM {args.size}^3 float16{replayed}, grid over {args.trials} configurations, {cores} compile processes "
          f"in all, {args.cache} TileLang cache")
    print(f"{'run':12} {'wall_s':>8} {'trials/min':>10} {'measured':>9} {'twice':>6} {'yields':>7}  per worker")
    for name, label in (("two", "2 workers"), ("one", "1 worker")):
        r = runs[name]
        per = ", ".join(f"gpu{w['gpu']}: {w['measured']}" + (f" ({w['error']})" if w["error"] else "")
                        for w in r["workers"])
        print(f"{label:12} {r['wall_s']:8.1f} {60 * r['measured'] / r['wall_s']:10.1f} {r['measured']:9d} "
              f"{r['measured_twice']:6d} {r['yields']:7d}  {per}")
    print(f"speed-up of 2 workers: {runs['one']['wall_s'] / runs['two']['wall_s']:.2f}x")
    print("best of each, re-timed interleaved on GPU 0:" if args.runner == "local" else "best of each (replayed figures):")
    for name, label, ms in (("two", "2 workers", times[0]), ("one", "1 worker", times[1])):
        print(f"  {label:10} {ms:.4f} ms  {flops / ms / 1e9:.1f} TFLOP/s  {runs[name]['best_config']}")
    print(f"  torch.matmul {times[2]:.4f} ms  {flops / times[2] / 1e9:.1f} TFLOP/s")
    print(f"  same configuration: {quality['same_config']}; 2-worker best / 1-worker best = {quality['two_over_one']:.3f}")

