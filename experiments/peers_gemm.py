"""tilesearch against TileLang's autotuner, Triton's autotune and cuBLAS on one GEMM grid (GPU).

Each tool runs in its own process with an empty TileLang kernel cache, so every tool compiles
from scratch; each process also times ``torch.matmul`` on the same inputs with the same method
(``tilesearch.runner.measure.bench``: CUDA events, L2 flushed, median), and every figure is
reported as a ratio to that. Tools:

- ``tilelang``: ``tilelang.autotuner.autotune`` sweeping the grid (its correctness check on,
  against ``torch.matmul``), wall time from the call to the tuned kernel.
- ``grid``: tilesearch measuring every configuration of the grid (the grid's best, and our
  compile throughput: configurations per minute over the build phase).
- ``search``: tilesearch with ``--strategy`` (default ``xgb`` if registered, else ``tpe``) and
  ``--trials`` trials over the same grid: wall time to its best.
- ``triton``: a Triton matmul with ``triton.autotune`` over a standard configuration list.

Then one more fresh process re-times every tool's best kernel and ``torch.matmul`` together,
interleaved on the same inputs (``retime``), so that the bests are compared within one process
and one clock: whether the searched kernel is within 3% of the grid's best is read there.
Compile throughput is measured over each tool's compile phase alone: TileLang's autotuner from
its call to the last of its compile futures (it compiles on a thread pool, and benchmarks while
compiling), tilesearch's builder (one process per core, started inside the measured span) from its
creation to the last result.

usage: python experiments/peers_gemm.py --out $OUT [--m 8192 --n 8192 --k 8192] [--grid small|large]
       [--tools tilelang,grid,search,triton] [--trials 8]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRIDS = {
    "small": dict(  # 32 valid configurations
        block_m=(128, 256), block_n=(128, 256), block_k=(32, 64), num_stages=(3, 4),
        threads=(128, 256), panel_size=(0, 8), warp_policy=("square",),
    ),
    "large": dict(  # 96 valid: three times the work, so that start-up weighs less in throughput
        block_m=(128, 256), block_n=(128, 256), block_k=(32, 64), num_stages=(2, 3, 4),
        threads=(128, 256), panel_size=(0, 8), warp_policy=("square", "full_row"),
    ),
}
GRID = "small"  # the child's grid, set from --grid


def grid_space():
    from search_spaces.gemm import constraints
    from tilesearch.space import Categorical, Space
    from tilesearch.target import Target

    knobs = GRIDS[GRID]
    return Space([Categorical(k, v) for k, v in knobs.items()], constraints("float16", Target.from_arch("sm_90a")))


def inputs(m, n, k):
    import torch

    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn((m, k), device="cuda", generator=g).half()
    b = torch.randn((k, n), device="cuda", generator=g).half()
    return a, b


def time_pair(fn, m, n, k):
    """Median ms of ``fn`` and of torch.matmul, interleaved."""
    import torch

    from tilesearch.op import Tolerance
    from tilesearch.runner.measure import MeasureSettings, bench, compare

    a, b = inputs(m, n, k)
    out = torch.empty((m, n), device="cuda", dtype=torch.float16)
    ours, base = bench([lambda: fn(a, b), lambda: torch.matmul(a, b, out=out)], MeasureSettings(), 50 * 2**20)
    err = compare([fn(a, b)], [a.double() @ b.double()], Tolerance(rel_fro=math.inf, max_rel=math.inf))[0]
    return ours, base, err


def tool_tilelang(m, n, k):
    import tilelang
    import tilelang.language as T
    import torch
    from tilelang.autotuner import autotune

    configs = list(grid_space().enumerate())

    @autotune(configs=configs, warmup=25, rep=100, ref_prog=lambda a, b, *rest: a @ b, rtol=1e-2, atol=1e-2)
    @tilelang.jit(out_idx=[-1])
    def kernel(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=8, warp_policy="square"):
        # imported here: TileLang's autotuner refuses closures over anything but plain values
        from search_spaces.gemm import gemm_program

        return gemm_program(m, n, k, "float16", "nn", block_m=block_m, block_n=block_n, block_k=block_k,
                            num_stages=num_stages, threads=threads, panel_size=panel_size, warp_policy=warp_policy)

    del T, torch
    compiled = _watch_tilelang_compiles()
    start = time.perf_counter()
    tuned = kernel()
    wall = time.perf_counter() - start
    best = getattr(tuned, "config", None) or getattr(getattr(tuned, "autotune_result", None), "config", None)
    ours, base, err = time_pair(lambda a, b: tuned(a, b), m, n, k)
    compile_wall = max(compiled) - start if compiled else None
    return dict(tool="tilelang autotune", configs=len(configs), wall_s=wall, best_ms=ours, matmul_ms=base,
                rel_err=err, best_config=best, compiled=len(compiled), build_wall_s=compile_wall,
                configs_per_min=60 * len(compiled) / compile_wall if compile_wall else None)


def _watch_tilelang_compiles():
    """Wraps the autotuner's compile-pool setup so that each compile future, when done, appends
    its end time to the returned list (TileLang 0.1.15: ``AutoTuner._prepare_compile_execution``)."""
    from tilelang.autotuner.tuner import AutoTuner

    ends = []
    original = AutoTuner._prepare_compile_execution

    def prepare(self, *args, **kwargs):
        pool, futures, future_to_unit, desc = original(self, *args, **kwargs)
        for future in futures:
            future.add_done_callback(lambda f: ends.extend([time.perf_counter()] * len(future_to_unit[f])))
        return pool, futures, future_to_unit, desc

    AutoTuner._prepare_compile_execution = prepare
    return ends


def tool_tilesearch(m, n, k, strategy, trials, storage):
    import tilesearch
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Candidate
    from tilesearch.target import Target

    space = grid_space()
    result = {}
    if strategy == "grid":
        # compile throughput: the build phase alone, every configuration, all workers
        configs = list(space.enumerate())
        target = Target.from_arch("sm_90a")
        workers = os.cpu_count() or 1  # nothing is measured meanwhile: every core compiles
        start = time.perf_counter()
        with LocalBuilder(workers, timeout=600) as builder:
            futures = [builder.submit(Candidate("gemm", dict(m=m, n=n, k=k, dtype="float16", layout="nn"), c, target))
                       for c in configs]
            ok = sum(f.result().ok for f in futures)
        build_wall = time.perf_counter() - start
        result.update(compiled=ok, build_wall_s=build_wall, configs_per_min=60 * ok / build_wall,
                      build_workers=workers)
        trials = len(configs)
    start = time.perf_counter()
    tuned = tilesearch.tune("gemm", m=m, n=n, k=k, space=space, strategy=strategy, trials=trials,
                            storage=storage, progress=False)
    wall = time.perf_counter() - start
    best = tuned.best[0]
    result.update(tool=f"tilesearch {strategy}", configs=space.count_valid(), trials=trials, wall_s=wall,
                  best_ms=best.latency_ms, matmul_ms=best.baseline_ms, rel_err=best.rel_err, best_config=best.config,
                  statuses=tuned.statuses)
    return result


def triton_matmul(m, n, k):
    """A Triton matmul autotuned (on its first call) over a standard configuration list; returns
    ``(run, kernel)``."""
    import torch
    import triton
    import triton.language as tl

    configs = [
        triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in [
            (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
            (64, 256, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 256, 128, 3, 8),
        ]
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (G * tiles_n)
        first = group * G
        rows = min(tiles_m - first, G)
        pm = first + (pid % (G * tiles_n)) % rows
        pn = (pid % (G * tiles_n)) // rows
        om = pm * BM + tl.arange(0, BM)
        on = pn * BN + tl.arange(0, BN)
        ok = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BK)):
            kmask = ok[None, :] + kk * BK < K
            x = tl.load(a + om[:, None] * sam + (ok[None, :] + kk * BK) * sak, mask=(om[:, None] < M) & kmask, other=0.0)
            y = tl.load(b + (ok[:, None] + kk * BK) * sbk + on[None, :] * sbn,
                        mask=(ok[:, None] + kk * BK < K) & (on[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
        tl.store(c + om[:, None] * scm + on[None, :] * scn, acc.to(tl.float16), mask=(om[:, None] < M) & (on[None, :] < N))

    def run(a, b, c=None):
        c = torch.empty((m, n), device="cuda", dtype=torch.float16) if c is None else c
        grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)  # noqa: E731
        mm[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        return c

    return run, mm


def tool_triton(m, n, k):
    import torch

    run, mm = triton_matmul(m, n, k)
    a, b = inputs(m, n, k)
    start = time.perf_counter()
    run(a, b)
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    ours, base, err = time_pair(run, m, n, k)
    import triton

    return dict(tool="triton autotune", configs=len(mm.configs), wall_s=wall, best_ms=ours, matmul_ms=base,
                rel_err=err, best_config=str(mm.best_config), version=triton.__version__)


def retime(m, n, k, configs):
    """Every tool's best kernel (TileLang configurations are rebuilt with tilesearch's builder of
    the same template; Triton re-autotunes) and torch.matmul, checked against float64 and timed
    interleaved in this one process. Returns {tool: {"ms", "rel_err"}} with "torch.matmul" too."""
    import torch

    from tilesearch import registry
    from tilesearch.op import Tolerance
    from tilesearch.runner.measure import MeasureSettings, bench, compare
    from tilesearch.target import detect

    op = registry.load("gemm")
    problem = op.problem(m=m, n=n, k=k, dtype="float16", layout="nn")
    target = detect()
    a, b = inputs(m, n, k)
    ref = a.double() @ b.double()
    runs = {}  # tool -> (fn, its output tensor)
    for tool, config in configs.items():
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        if tool == "triton autotune":
            run, _ = triton_matmul(m, n, k)
            runs[tool] = (lambda run=run, c=c: run(a, b, c), c)
        else:
            kernel = op.build(problem, config, target)
            runs[tool] = (lambda kernel=kernel, c=c: kernel(a, b, c), c)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    runs["torch.matmul"] = (lambda c=c: torch.matmul(a, b, out=c), c)
    errors = {}
    for name, (fn, c) in runs.items():
        c.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        errors[name] = compare([c], [ref], Tolerance(rel_fro=math.inf, max_rel=math.inf))[0]
    times = bench([fn for fn, _ in runs.values()], MeasureSettings(rep_ms=2000, max_reps=1000), target.l2_bytes)
    return {name: {"ms": t, "rel_err": errors[name]} for name, t in zip(runs, times)}


def plot(result, path):
    """Two panels from a ``peers_gemm.json`` dict: each tool's tuning wall time, and every best
    kernel's TFLOP/s re-timed together with ``torch.matmul`` (labelled with the ratio to it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows, together = result["tools"], result.get("retime") or {}
    flops = result.get("flops") or rows[0]["tflops"] * 1e12 * rows[0]["best_ms"] * 1e-3
    fig, (walls, speed) = plt.subplots(1, 2, figsize=(12, 4))
    names = [r["tool"] for r in rows]
    # the grid tool compiles everything in a separate phase first (its throughput), then tunes
    before = [r.get("build_wall_s", 0) if r.get("build_workers") else 0 for r in rows]
    walls.barh(names, before, color="tab:gray", label="separate compile phase")
    walls.barh(names, [r["wall_s"] for r in rows], left=before, color="tab:blue", label="tuning call")
    for i, r in enumerate(rows):
        parts = f" ({before[i]:.1f} + {r['wall_s']:.1f})" if before[i] else ""
        walls.text(before[i] + r["wall_s"], i, f" {before[i] + r['wall_s']:.1f} s{parts}, "
                   f"{r.get('trials', r['configs'])} measured", va="center", fontsize=8)
    walls.set_xlabel("wall time (s), compile + measure")
    walls.invert_yaxis()
    walls.set_xlim(0, 1.45 * max(b + r["wall_s"] for b, r in zip(before, rows)))
    walls.legend(fontsize=8, loc="lower right")
    if together:
        base = together["torch.matmul"]["ms"]
        kernels = list(together)
        tflops = [flops / (together[k]["ms"] * 1e-3) / 1e12 for k in kernels]
        colors = ["tab:red" if k == "torch.matmul" else "tab:green" for k in kernels]
        speed.barh(kernels, tflops, color=colors)
        for i, k in enumerate(kernels):
            speed.text(tflops[i], i, f" {tflops[i]:.0f} ({base / together[k]['ms']:.3f}x)", va="center", fontsize=8)
        speed.set_xlabel("best kernel re-timed together, TFLOP/s (x torch.matmul)")
        speed.invert_yaxis()
        speed.set_xlim(0, 1.3 * max(tflops))
    fig.suptitle(result.get("title", "GEMM peers"), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def child(args):
    global GRID
    GRID = args.grid
    m, n, k = args.m, args.n, args.k
    if args.tool == "retime":
        print("RESULT " + json.dumps(retime(m, n, k, json.loads(args.configs))), flush=True)
        return
    if args.tool == "tilelang":
        res = tool_tilelang(m, n, k)
    elif args.tool == "triton":
        res = tool_triton(m, n, k)
    else:
        strategy = "grid" if args.tool == "grid" else args.strategy
        res = tool_tilesearch(m, n, k, strategy, args.trials, f"sqlite:///{args.scratch}/ts.db")
    res["tflops"] = 2 * m * n * k / (res["best_ms"] * 1e-3) / 1e12
    res["vs_matmul"] = res["matmul_ms"] / res["best_ms"]
    print("RESULT " + json.dumps(res, default=str), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--tools", default="tilelang,grid,search,triton")
    p.add_argument("--grid", default="small", choices=sorted(GRIDS), help="the configurations every tool sweeps")
    p.add_argument("--strategy", default="")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--tool")
    p.add_argument("--scratch")
    p.add_argument("--configs", help="retime: JSON {tool: config}")
    p.add_argument("--replot", metavar="JSON", help="draw peers_gemm.png beside a recorded peers_gemm.json (no GPU)")
    args = p.parse_args()
    if args.tool:
        return child(args)
    if args.replot:
        return replot(Path(args.replot), args)
    from tilesearch import strategy as strategies

    args.strategy = args.strategy or ("xgb" if "xgb" in strategies.STRATEGIES else "tpe")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for tool in args.tools.split(","):
        res = run_child(args, tool, out)
        if res is not None:
            rows.append(res)
    (out / "peers_gemm.json").write_text(json.dumps({"tools": rows}, indent=1, default=str))
    best = {r["tool"]: (r["best_config"] if r["tool"] != "triton autotune" else None) for r in rows}
    best = {tool: config for tool, config in best.items() if isinstance(config, dict) or tool == "triton autotune"}
    together = run_child(args, "retime", out, configs=json.dumps(best)) if best else None
    result = {"tools": rows, "retime": together, "flops": 2 * args.m * args.n * args.k,
              "title": f"GEMM {args.m}x{args.n}x{args.k} float16, {args.grid} grid, H100 peers"}
    (out / "peers_gemm.json").write_text(json.dumps(result, indent=1, default=str))
    if rows:
        plot(result, out / "peers_gemm.png")
    print(f"\nGEMM {args.m}x{args.n}x{args.k} float16; each row's torch.matmul timed in the same process")
    print(f"{'tool':<24}{'configs':>8}{'trials':>7}{'wall_s':>8}{'best_ms':>9}{'TFLOP/s':>9}{'vs_matmul':>10}{'rel_err':>10}")
    for r in rows:
        print(f"{r['tool']:<24}{r['configs']:>8}{r.get('trials', r['configs']):>7}{r['wall_s']:>8.1f}{r['best_ms']:>9.4f}"
              f"{r['tflops']:>9.1f}{r['vs_matmul']:>10.3f}{r['rel_err']:>10.2e}")
    for r in rows:
        if r.get("configs_per_min"):
            print(f"{r['tool']} compile phase: {r['compiled']} configs in {r['build_wall_s']:.1f} s = "
                  f"{r['configs_per_min']:.0f}/min" + (f" ({r['build_workers']} processes, from their start)"
                                                       if r.get("build_workers") else ""))
    if together:
        flops = 2 * args.m * args.n * args.k
        base = together["torch.matmul"]["ms"]
        print("\nre-timed together in one process, interleaved (same inputs, same clock):")
        print(f"{'kernel':<24}{'ms':>9}{'TFLOP/s':>9}{'vs_matmul':>10}{'rel_err':>10}")
        for name, r in together.items():
            print(f"{name:<24}{r['ms']:>9.4f}{flops / r['ms'] / 1e9:>9.1f}{base / r['ms']:>10.3f}{r['rel_err']:>10.2e}")
        grid_best = min(r["ms"] for name, r in together.items() if name in ("tilesearch grid", "tilelang autotune"))
        walls = {r["tool"]: r["wall_s"] for r in rows}
        search = f"tilesearch {args.strategy}"
        if search in together and "tilelang autotune" in walls:
            print(f"{search} best / grid best: {together[search]['ms'] / grid_best:.3f} (within 3%: "
                  f"{together[search]['ms'] <= 1.03 * grid_best}); wall time TileLang autotune / {search}: "
                  f"{walls['tilelang autotune'] / walls[search]:.1f}x")
        rates = {r["tool"]: r["configs_per_min"] for r in rows if r.get("configs_per_min")}
        if "tilesearch grid" in rates and "tilelang autotune" in rates:
            print(f"compile throughput tilesearch / TileLang autotune: {rates['tilesearch grid'] / rates['tilelang autotune']:.1f}x")


def replot(path, args):
    """``--replot``: the plot of a recorded run (of ``--m --n --k --grid``, for runs that did not
    record them); exit status 2 if ``path`` is not one."""
    try:
        result = json.loads(path.read_text())
        result["tools"][0]["tflops"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        print(f"peers_gemm: {path} is not a peers_gemm.json ({type(e).__name__}: {e}); pass the file a run wrote",
              file=sys.stderr)
        return 2
    row = result["tools"][0]
    recorded = result.get("flops") or row["tflops"] * 1e12 * row["best_ms"] * 1e-3
    if abs(recorded / (2 * args.m * args.n * args.k) - 1) > 1e-6:
        print(f"peers_gemm: {path} is not a run of {args.m}x{args.n}x{args.k}; pass that run's --m --n --k",
              file=sys.stderr)
        return 2
    result.setdefault("title", f"GEMM {args.m}x{args.n}x{args.k} float16, {args.grid} grid, H100 peers")
    plot(result, path.with_name("peers_gemm.png"))
    return 0


def run_child(args, tool, out, configs=None):
    """Runs one tool in a fresh process with an empty TileLang cache; its RESULT dict or None."""
    scratch = tempfile.mkdtemp(prefix=f"peer-{tool}-")
    env = {**os.environ, "TILELANG_CACHE_DIR": f"{scratch}/cache", "TILELANG_AUTO_TUNING_DISABLE_CACHE": "1",
           "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, __file__, "--tool", tool, "--scratch", scratch, "--m", str(args.m), "--n", str(args.n),
           "--k", str(args.k), "--grid", args.grid, "--strategy", args.strategy, "--trials", str(args.trials)]
    if configs is not None:
        cmd += ["--configs", configs]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    (out / f"peer_{tool}.log").write_text(proc.stdout + proc.stderr)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        print(f"{tool}: failed (rc {proc.returncode}); see peer_{tool}.log; tail:\n{proc.stderr[-1500:]}", flush=True)
        return None
    res = json.loads(line[-1][7:])
    if isinstance(res, dict) and "tool" in res:
        res["process_wall_s"] = time.perf_counter() - start
    print(f"{tool}: done in {time.perf_counter() - start:.0f} s", flush=True)
    return res


if __name__ == "__main__":
    sys.exit(main())
