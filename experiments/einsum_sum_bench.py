"""einsum_sum on one GPU, in one run: tune, check every algorithm, time against PyTorch.

For each problem (t=k=8192 h=16 d=128; t=k=1024 h=16 d=128; t=1000 k=3000 h=12 d=72, a multiple of
no tile), bfloat16 in, float32 out (and t=k=8192 again with S in bfloat16, the PyTorch expression's
own output dtype):

1. tune with tilesearch's real builder and runner: a few hand-picked configurations (one per
   algorithm at least) then TPE over the whole space, ``--trials`` measured configurations;
2. take the fastest correct configuration of each algorithm, run it on fresh inputs and print
   its relative Frobenius and max errors against float64 beside the PyTorch expression's;
3. time those kernels, the PyTorch expression, a device-to-device copy and a memset of S
   interleaved in one loop (median of CUDA-event timings, L2 flushed before each run);
4. report the speedup and how close the best kernel comes to the time floor of writing S once
   at the measured copy bandwidth.

Writes ``einsum_sum_bench.log``, ``einsum_sum_bench.json`` and the plot ``einsum_sum.png`` under
``--out`` (default ``$OUT`` or ``./out``) and prints a short table last. Run:
``python experiments/einsum_sum_bench.py --out $OUT``; redraw the plot from a recorded JSON without a
GPU: ``python experiments/einsum_sum_bench.py --replot path/to/einsum_sum_bench.json``.
"""

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from search_spaces import einsum_sum as es
from tilesearch import registry, report
from tilesearch.database import TuningDatabase
from tilesearch.op import Tolerance
from tilesearch.runner.measure import MeasureSettings, bench, check, compare
from tilesearch.space import Space
from tilesearch.strategy import Proposal, SearchContext, Strategy, create
from tilesearch.strategy.enumerated import candidate_key
from tilesearch.target import Target, detect
from tilesearch.tuner import tune
from tilesearch.workers import IsolatedWorker

PROBLEMS = {
    "8192": dict(t=8192, k=8192, h=16, d=128, dtype="bfloat16"),
    # S in bfloat16, the dtype the PyTorch expression returns: half the bytes to write
    "8192-bf16out": dict(t=8192, k=8192, h=16, d=128, dtype="bfloat16", out_dtype="bfloat16"),
    "1024": dict(t=1024, k=1024, h=16, d=128, dtype="bfloat16"),
    "odd": dict(t=1000, k=3000, h=12, d=72, dtype="bfloat16"),
}

# multiples of no tile, odd k and d (unaligned rows: no TMA, no vector stores), and a single element
EDGE_PROBLEMS = [dict(t=1, k=1, h=1, d=1), dict(t=130, k=67, h=5, d=40), dict(t=1000, k=3001, h=3, d=71)]

# hand-picked starting points: the best kernel of the last H100 run (commit e28dbc7: fused
# 64x64 k_split=2 async, 0.119 ms, 14.1x), then the knobs added after it: deeper Q prefetch
# in fused's prologue (q_stages), more TMA stores in flight (store_buffers), and reduce_stream
# (Q summed once by its own kernel); one of each other algorithm
SEEDS = [
    dict(algorithm="fused", block_t=64, block_k=64, num_stages=3, threads=128, k_split=2, epilogue="async"),
    dict(algorithm="fused", block_t=64, block_k=64, num_stages=2, threads=128, k_split=1, epilogue="async", q_stages=4, store_buffers=4),
    dict(algorithm="fused", block_t=64, block_k=64, num_stages=2, threads=128, k_split=2, epilogue="async", q_stages=4, store_buffers=4),
    dict(algorithm="fused", block_t=64, block_k=128, num_stages=2, threads=128, k_split=1, epilogue="async", q_stages=4, store_buffers=3),
    dict(algorithm="fused", block_t=64, block_k=64, num_stages=3, threads=128, k_split=2, epilogue="async", q_stages=4),
    dict(algorithm="reduce_stream", block_t=64, block_k=64, num_stages=2, threads=128, k_split=2, epilogue="async", store_buffers=4),
    dict(algorithm="reduce_stream", block_t=64, block_k=64, num_stages=2, threads=128, k_split=4, epilogue="async", store_buffers=4),
    dict(algorithm="reduce_stream", block_t=64, block_k=128, num_stages=2, threads=128, k_split=2, epilogue="async", store_buffers=3),
    dict(algorithm="reduce_stream", block_t=128, block_k=64, num_stages=2, threads=256, k_split=2, epilogue="async", store_buffers=4),
    dict(algorithm="reduce_stream", block_t=64, block_k=64, num_stages=2, threads=128, k_split=1, epilogue="async", store_buffers=4),
    dict(algorithm="reduce_stream", block_t=64, block_k=64, num_stages=3, threads=128, k_split=2, epilogue="async", store_buffers=2),
    dict(algorithm="fused", block_t=64, block_k=128, num_stages=2, threads=128, k_split=2),
    dict(algorithm="reduce_first", block_t=128, block_k=128, block_d=128, num_stages=1, threads=256),
    dict(algorithm="direct", block_t=128, block_k=256, block_d=128, num_stages=3, threads=256),
    dict(algorithm="direct", block_t=64, block_k=128, block_d=64, num_stages=3, threads=128),
]


class SeededStrategy(Strategy):
    """Proposes ``seeds`` (the valid ones, then the first valid configuration of any algorithm
    no seed covers) before handing over to ``then``; ``then``'s sampler sees all of them."""

    def __init__(self, seeds: list[dict[str, Any]], then: Strategy) -> None:
        self.name = f"seeded-{then.name}"
        self.then = then
        self.seeds = seeds
        self._queue: list[dict[str, Any]] | None = None

    def sampler(self) -> Any:
        return self.then.sampler()

    def _prepare(self, context: SearchContext) -> list[dict[str, Any]]:
        defaults = {knob.name: knob.values()[0] for knob in context.space.knobs}
        queue = [c for c in ({**defaults, **s} for s in self.seeds) if context.space.is_valid(c)]
        for config in context.space.enumerate():
            if config["algorithm"] not in {c["algorithm"] for c in queue}:
                queue.append(config)
        return queue

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self._queue is None:
            self._queue = self._prepare(context)
        taken = context.taken()
        out = []
        while self._queue and len(out) < n:
            config = self._queue.pop(0)
            if candidate_key(context, config) not in taken:
                out.append(Proposal(config))
        if len(out) < n:
            out += self.then.propose(context, n - len(out))
        return out


class Log:
    def __init__(self, path: Path) -> None:
        self.file = path.open("a")

    def __call__(self, *parts: Any) -> None:
        text = " ".join(str(p) for p in parts)
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


def best_per_algorithm(db: TuningDatabase) -> tuple[dict[str, Any], dict[str, int]]:
    """Fastest correct record of each algorithm, and counts of statuses."""
    best: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for rec in db.records():
        if rec.duplicate_of is not None:
            continue
        counts[rec.status] = counts.get(rec.status, 0) + 1
        if rec.status != "ok" or rec.latency_ms is None:
            continue
        alg = rec.config["algorithm"]
        if alg not in best or rec.latency_ms < best[alg].latency_ms:
            best[alg] = rec
    return best, counts


def failures(db: TuningDatabase, limit: int = 5) -> list[str]:
    out = []
    for rec in db.records():
        if rec.status not in ("ok", "invalid") and rec.duplicate_of is None:
            first = (rec.error or "").strip().splitlines()
            out.append(f"trial {rec.number} {rec.status} {rec.config}: {first[-1] if first else ''}"[:400])
    return out[:limit]


def short(config: dict[str, Any]) -> str:
    used = es.USES[config["algorithm"]]
    return ",".join(f"{k}={v}" for k, v in config.items() if k in used)


def check_and_time(problem_params: dict[str, Any], configs: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """Errors of each configuration and of the PyTorch expression on the same inputs, then
    interleaved timings of all of them, a copy and a memset of S. Runs in a fresh GPU worker
    process (see :func:`in_worker`), as the runner does: timed in the bench's own process, which
    had run the tuner, short kernels came out up to 3x slower than the runner measured them (the
    first H100 run, odd size: PyTorch 0.29 ms against 0.10 ms). Returns the figures and the lines
    to log."""
    lines: list[str] = []
    log = lines.append
    op = registry.load("einsum_sum")
    problem = op.problem(**problem_params)
    target = detect()
    device = torch.device("cuda")
    gen = torch.Generator(device=device).manual_seed(1234)
    q, key = op.make_inputs(problem, device, gen)
    (ref,) = op.reference(problem, (q, key))
    loose = Tolerance(rel_fro=float("inf"), max_rel=float("inf"))
    torch_out = es.pytorch_expression(q, key)
    torch_fro, torch_max, _ = compare([torch_out], [ref], loose)
    del torch_out
    out: dict[str, Any] = {"pytorch": {"rel_fro": torch_fro, "max_rel": torch_max}, "algorithms": {}}
    log(f"  pytorch expression: rel_fro {torch_fro:.3e}  max_rel {torch_max:.3e}")
    fns, names = [], []
    for alg, config in configs.items():
        entry: dict[str, Any] = {"config": config}
        out["algorithms"][alg] = entry
        try:
            kernel = op.build(problem, config, target)
            (s,) = op.make_outputs(problem, device)
            fro, mx, why = check(kernel, (q, key), (s,), [ref], op.tolerance(problem, config))
            entry.update(rel_fro=fro, max_rel=mx, within_tolerance=why is None, beats_pytorch_error=fro <= torch_fro)
            log(
                f"  {alg:13s} rel_fro {fro:.3e}  max_rel {mx:.3e}  "
                f"{'ok' if why is None else 'FAILS: ' + why}  "
                f"{'<=' if fro <= torch_fro else 'WORSE THAN'} pytorch  [{short(config)}]"
            )
            fns.append(lambda kernel=kernel, s=s: kernel(q, key, s))
            names.append(alg)
        except Exception as exc:  # noqa: BLE001 - a failing kernel is a result
            entry["error"] = f"{type(exc).__name__}: {exc}"[-2000:]
            log(f"  {alg:13s} ERROR {entry['error'][:300]}")
    del ref
    (s_like,) = op.make_outputs(problem, device)
    src = torch.empty_like(s_like).normal_()
    dst = torch.empty_like(s_like)
    fns += [lambda: es.pytorch_expression(q, key), lambda: dst.copy_(src), lambda: dst.zero_()]
    names += ["pytorch", "copy", "memset"]
    times = bench(fns, MeasureSettings(), target.l2_bytes)
    ms = dict(zip(names, times))
    s_bytes = s_like.numel() * s_like.element_size()
    copy_bw = 2 * s_bytes / (ms["copy"] * 1e-3)  # a copy reads and writes S's bytes
    out.update(
        timings_ms=ms,
        s_bytes=s_bytes,
        copy_gbps=copy_bw / 1e9,
        floor_write_s_ms=s_bytes / copy_bw * 1e3,
        floor_all_bytes_ms=op.bytes(problem) / copy_bw * 1e3,
    )
    for alg in out["algorithms"]:
        if alg in ms:
            out["algorithms"][alg].update(latency_ms=ms[alg], speedup=ms["pytorch"] / ms[alg])
    log(
        "  timings (ms): " + ", ".join(f"{n} {t:.4f}" for n, t in ms.items())
        + f"; copy {copy_bw / 1e9:.0f} GB/s; floor (write S once) {out['floor_write_s_ms']:.4f} ms"
    )
    return out, lines


def in_worker(path: str, *args: Any, timeout: float = 600.0) -> Any:
    """Runs ``path(*args)`` in a fresh process on GPU 0 (the runner's isolation); raises on failure."""
    worker = IsolatedWorker(env={"CUDA_VISIBLE_DEVICES": "0"}, name="bench-gpu")
    try:
        result = worker.call(path, *args, timeout=timeout)
    finally:
        with contextlib.suppress(Exception):  # a worker that died mid-call may be half torn down
            worker.stop(kill=True)
    if not result.ok:
        raise RuntimeError(result.error or "the GPU worker died")
    return result.value


def edge_sizes(op: Any, storage: str, target: Any, log: Log) -> dict[str, Any]:
    """The first valid configuration of each algorithm and epilogue on sizes that are multiples of
    no tile (odd k and d: no TMA, no vector stores), checked against float64 by the isolated runner."""
    log("\n== edge sizes: first valid configuration of each algorithm and epilogue, via the runner")
    out: dict[str, Any] = {}
    for params in EDGE_PROBLEMS:
        problem = op.problem(**params)
        full = op.space(problem, target)
        picks: list[dict[str, Any]] = []
        for config in full.enumerate():
            if not any(p["algorithm"] == config["algorithm"] and p["epilogue"] == config["epilogue"] for p in picks):
                picks.append(config)
        space = Space(full.knobs, [*full.constraints, lambda c, picks=picks: None if c in picks else "not picked"])
        try:
            result = tune(op, problem, space=space, strategy="grid", trials=len(picks), storage=storage, progress=False)
            rows = {}
            for rec in TuningDatabase(storage, result.study).records():
                if rec.duplicate_of is None and rec.status != "invalid":
                    rows[f"{rec.config['algorithm']}/{rec.config['epilogue']}"] = {
                        "status": rec.status, "rel_err": rec.rel_err, "speedup": rec.speedup,
                        "error": (rec.error or "")[-300:] or None,
                    }
            out[problem.key] = rows
            log(f"  {problem.key}: " + "; ".join(
                f"{k} {v['status']} err {v['rel_err'] if v['rel_err'] is None else format(v['rel_err'], '.2e')}"
                for k, v in sorted(rows.items())
            ))
            for k, v in rows.items():
                if v["status"] != "ok":
                    log(f"    {k}: {v['error']}")
        except Exception as exc:  # noqa: BLE001
            out[problem.key] = {"error": traceback.format_exc()[-3000:]}
            log(f"  {problem.key}: ERROR {type(exc).__name__}: {exc}")
    return out


def _bars(entry: dict[str, Any]) -> list[tuple[str, float | None, str, str]]:
    """One problem's bars, top to bottom: (name, ms, label, kind) for each algorithm's best kernel,
    the PyTorch expression and the floor; ms is None for a kernel that has no timing."""
    timings = entry.get("timings_ms", {})
    pytorch = timings.get("pytorch")
    bars = []
    for alg, a in entry.get("algorithms", {}).items():
        ms = a.get("latency_ms")
        label = "error" if ms is None else f"{a['speedup']:.1f}x" if a.get("speedup") else f"{ms:.3g} ms"
        bars.append((alg, ms, label, "kernel"))
    bars += [(alg, None, "no correct kernel", "kernel") for alg in entry.get("no_correct_kernel", [])]
    if pytorch is not None:
        bars.append(("PyTorch", pytorch, f"{pytorch:.3g} ms", "pytorch"))
    if entry.get("floor_write_s_ms") is not None:
        bars.append(("floor (write S)", entry["floor_write_s_ms"], f"{entry['floor_write_s_ms']:.3g} ms", "floor"))
    return bars


def _heading(name: str, entry: dict[str, Any]) -> str:
    p = entry.get("problem", {})
    shape = " ".join(f"{k}={p[k]}" for k in ("t", "k", "h", "d") if k in p)
    return f"{name}: {shape}, S {p.get('out_dtype', '?')}"


def plot(results: dict[str, Any], out_path: Path) -> None:
    """Draws ``results`` (the dict written to einsum_sum_bench.json) to the PNG ``out_path``: per
    problem, the re-timed ms of each algorithm's best kernel (labelled with its speedup over
    PyTorch), the PyTorch expression and the floor, on a log time axis. Does nothing without
    matplotlib or without any timed problem."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return
    groups = [(name, _bars(e)) for name, e in results.get("problems", {}).items()]
    groups = [(name, bars) for name, bars in groups if bars]
    if not groups:
        return
    colors = {"kernel": "tab:blue", "pytorch": "tab:orange", "floor": "tab:gray"}
    fig, axes = plt.subplots(len(groups), 1, sharex=True, squeeze=False,
                             figsize=(8, 1.0 + sum(0.32 * len(b) + 0.45 for _, b in groups)),
                             gridspec_kw={"height_ratios": [len(b) for _, b in groups]})
    timed = [ms for _, bars in groups for _, ms, _, _ in bars if ms]
    low = min(timed) / 2
    for ax, (name, bars) in zip(axes[:, 0], groups):
        ax.set_xscale("log")
        ax.set_xlim(low, max(timed) * 2.5)
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        y = list(range(len(bars)))[::-1]
        for yi, (_, ms, label, kind) in zip(y, bars):
            if ms:
                ax.barh(yi, ms, color=colors[kind], height=0.7)
            ax.text(ms or low, yi, f" {label}", va="center", fontsize=8)
        ax.set_yticks(y, [b[0] for b in bars], fontsize=8)
        ax.set_title(_heading(name, results["problems"][name]), fontsize=9, loc="left")
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.tick_params(labelbottom=True, labelsize=8)
    ax.set_xlabel("milliseconds (log scale)")
    fig.suptitle("einsum-sum, re-timed together in one worker, lower is better", fontsize=11)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)


def replot(json_path: Path) -> int:
    """Redraws ``einsum_sum.png`` next to a recorded ``einsum_sum_bench.json``, without a GPU;
    returns 2 with a one-line error if the file is missing or not the bench's JSON."""
    try:
        results = json.loads(json_path.read_text())
        problems = results.get("problems") if isinstance(results, dict) else None
        if not isinstance(problems, dict) or not all(isinstance(e, dict) for e in problems.values()):
            raise ValueError("not einsum_sum_bench.json: no 'problems' table")
    except (OSError, ValueError) as exc:
        print(f"einsum_sum_bench: cannot replot {json_path}: {exc}", file=sys.stderr)
        return 2
    out_path = json_path.with_name("einsum_sum.png")
    plot(results, out_path)
    print(out_path if out_path.exists() else "no plot: matplotlib missing or no problem timed")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--trials", type=int, default=56, help="measured configurations per problem (8192)")
    parser.add_argument("--trials-small", type=int, default=32, help="measured configurations per smaller problem")
    parser.add_argument("--budget-s", type=float, default=400.0, help="stop tuning further problems after this")
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--replot", type=Path, metavar="JSON", help="only redraw einsum_sum.png next to this JSON")
    args = parser.parse_args()
    if args.replot:
        return replot(args.replot)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = Log(out_dir / "einsum_sum_bench.log")
    start = time.perf_counter()
    op = registry.load("einsum_sum")
    storage = f"sqlite:///{(out_dir / 'einsum_sum_tilesearch.db').resolve()}"
    results: dict[str, Any] = {"problems": {}}
    log(f"torch {torch.__version__}; the GPU is named by the first tuning run below")

    for name in args.problems.split(","):
        problem = op.problem(**PROBLEMS[name])
        entry: dict[str, Any] = {"problem": problem.to_dict()}
        results["problems"][name] = entry
        log(f"\n== {name}: {problem.key}")
        trials = args.trials if name.startswith("8192") else args.trials_small
        if time.perf_counter() - start > args.budget_s:
            trials = 0
            log("  time budget spent: no tuning, hand-picked configurations only")
        try:
            t0 = time.perf_counter()
            strategy = SeededStrategy(SEEDS, create("tpe", 0))
            result = tune(op, problem, strategy=strategy, trials=max(trials, 1), storage=storage, progress=False)
            if "gpu" not in results:
                results["gpu"] = result.target.to_dict()
                log(f"  gpu: {result.target.gpu} ({result.target.arch}, {result.target.num_sms} SMs)")
            db = TuningDatabase(storage, result.study)
            best, counts = best_per_algorithm(db)
            entry.update(study=result.study, statuses=counts, tune_s=time.perf_counter() - t0, compile_s=result.compile_s)
            log(f"  tuned {result.measured_now} configurations in {entry['tune_s']:.0f} s; statuses {counts}")
            if result.best:
                log(report.best_table(result.best[:5]))
            for line in failures(db):
                log("  failure:", line)
            entry["tuned"] = {
                alg: {"config": r.config, "latency_ms": r.latency_ms, "baseline_ms": r.baseline_ms, "speedup": r.speedup, "rel_err": r.rel_err}
                for alg, r in best.items()
            }
            configs = {alg: r.config for alg, r in best.items()}
            for alg in es.ALGORITHMS:  # kernels that never passed the runner are not run in this process
                if alg not in configs:
                    entry.setdefault("no_correct_kernel", []).append(alg)
                    log(f"  {alg}: NO correct configuration among the trials (see failures above)")
            figures, lines = in_worker("einsum_sum_bench:check_and_time", problem.to_dict(), configs)
            for line in lines:
                log(line)
            entry.update(figures)
        except Exception as exc:  # noqa: BLE001 - keep going: the other problems still report
            entry["error"] = traceback.format_exc()[-4000:]
            log(f"  ERROR {type(exc).__name__}: {exc}")
        (out_dir / "einsum_sum_bench.json").write_text(json.dumps(results, indent=1, default=str))

    target = Target.from_dict(results["gpu"]) if "gpu" in results else Target.from_arch("sm_90a")
    results["edge_sizes"] = edge_sizes(op, storage, target, log)
    results["wall_s"] = time.perf_counter() - start
    (out_dir / "einsum_sum_bench.json").write_text(json.dumps(results, indent=1, default=str))
    rows = []
    for name, entry in results["problems"].items():
        timings = entry.get("timings_ms", {})
        for alg, a in entry.get("algorithms", {}).items():
            tuned = entry.get("tuned", {}).get(alg, {})
            rows.append([
                name, alg, a.get("latency_ms"), timings.get("pytorch"), a.get("speedup"), tuned.get("speedup"),
                a.get("rel_fro"), entry.get("pytorch", {}).get("rel_fro"),
                entry.get("floor_write_s_ms"),
                (entry["floor_write_s_ms"] / a["latency_ms"]) if a.get("latency_ms") else None,
                "yes" if a.get("within_tolerance") and a.get("beats_pytorch_error") else "NO",
            ])
    edge_ok = all(
        "error" not in checked and all(v["status"] == "ok" for v in checked.values())
        for checked in results["edge_sizes"].values()
    )
    log(f"\nedge sizes all correct: {'yes' if edge_ok else 'NO (see above)'}")
    log(
        f"wall {results['wall_s']:.0f} s; ms, pytorch_ms, speedup: re-timed together in a fresh worker; "
        "runner_x: speedup the runner measured while tuning; floor_ms: writing S once at the measured "
        "copy bandwidth; ok: within tolerance and error <= pytorch's"
    )
    log(report.table(rows, ["problem", "algorithm", "ms", "pytorch_ms", "speedup", "runner_x", "rel_err", "pytorch_err", "floor_ms", "floor/ms", "ok"]))
    plot(results, out_dir / "einsum_sum.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
