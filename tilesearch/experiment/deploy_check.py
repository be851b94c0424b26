"""Every tuned kernel deployable, for every shape (issue 14), checked on one GPU.

Parts (``parts=a,b,c``; each can run in its own call, all share ``work``):

a. composite kernels: tunes the two split-K GEMMs (m=16 n=8192 k=8192 float16 nn;
   m=16 n=4096 k=14336 bfloat16 nt) and a ``reduce_first`` einsum-sum, each in the op's space
   with the split (or the algorithm) pinned, so the exported best is a composite program; then
   loads each artifact and checks its output bitwise against the tuned program's, in eager mode,
   under ``torch.compile(fullgraph=True)`` and replayed from a CUDA graph.
b. a range: tunes ``m=1..16384`` for each ``--pairs`` (n, k), exports its dispatch artifact, and
   certifies it on ``--heldout`` sizes that were not tuned: each is tuned for exactly that size,
   then the exported run-time-M kernel, that size's best kernel and ``torch.matmul`` are timed
   side by side (CUDA events, L2 flushed, interleaved); regret = dispatched / best - 1.
c. the MLP example (``examples/llama_mlp.py``, Llama-3-8B's gate/up/down): tunes its two GEMM
   ranges (fewer sizes, no held-out) and runs the block against PyTorch eager and compile.

Databases and artifacts go under ``work`` (default ``/tmp/tilesearch-deploy``); a log and
``deploy_check.json`` under ``out`` (default ``$OUT``); a short table last. The work of
``experiments/deploy_check.py``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout: part c runs its examples/
sys.path.insert(0, str(ROOT / "examples"))

SPLIT_K_SHAPES = (
    {"m": 16, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn"},
    {"m": 16, "n": 4096, "k": 14336, "dtype": "bfloat16", "layout": "nt"},
)
EINSUM = {"t": 4096, "k": 4096, "h": 16, "d": 128, "dtype": "bfloat16"}


def pinned_space(op: Any, problem: Any, target: Any, knob: str, keep: Any) -> Any:
    """The op's space with ``knob`` restricted to the values ``keep`` accepts (constraints kept)."""
    from tilesearch.space import Categorical, Space

    space = op.space(problem, target)
    knobs = [Categorical(k.name, tuple(v for v in k.values() if keep(v))) if k.name == knob else k
             for k in space.knobs]
    return Space(knobs, space.constraints)


def part_a(args: Any, log: Any) -> list[dict[str, Any]]:
    from tilesearch import registry
    from tilesearch.deploy import load
    from tilesearch.target import detect
    from tilesearch.testing.deployed import matches_tuned
    from tilesearch.tuner import tune

    target = detect()
    rows = []
    jobs = [("gemm", p, "split_k", lambda v: v > 1) for p in SPLIT_K_SHAPES]
    jobs.append(("einsum_sum", EINSUM, "algorithm", lambda v: v == "reduce_first"))
    for name, params, knob, keep in jobs:
        op = registry.load(name)
        problem = op.problem(**params)
        row: dict[str, Any] = {"op": name, "problem": problem.key}
        try:
            study = f"deploy-check-{name}-{problem.key}-{knob}"
            space = pinned_space(op, problem, target, knob, keep)
            result = tune(op, problem, space=space, strategy="xgb", trials=args.trials_a, storage=args.storage,
                          study=study, progress=False)
            best = result.best[0]
            row.update(config=best.config, latency_ms=best.latency_ms, speedup=best.speedup)
            from tilesearch.deploy import export

            meta = export(op, problem, out=Path(args.work) / f"{name}-{knob}-{len(rows)}", storage=args.storage,
                          study=study)
            kernel = load(Path(args.work) / f"{name}-{knob}-{len(rows)}")
            row.update(launches=len(meta.launches), workspaces=[w.name for w in meta.workspaces])
            row.update(matches_tuned(op, problem, kernel, best.config, target))
        except Exception as exc:  # noqa: BLE001 - recorded, the other parts go on
            row["error"] = f"{type(exc).__name__}: {exc}"
            log(traceback.format_exc())
        log(json.dumps(row, default=str))
        rows.append(row)
    return rows


def timed_regret(kernel: Any, params: dict[str, Any], storage: str, cache: Path) -> Any:
    """``measure`` for :func:`certify`: the exported dispatch kernel, the size's best and
    torch.matmul, timed side by side on the same inputs; outputs checked against float64. The
    dispatched configuration compiled for exactly this size is timed beside them, so the regret
    splits into what the run-time M costs and what serving the size from its bucket costs."""
    import torch

    from tilesearch import registry
    from tilesearch.deploy import load
    from tilesearch.range_tuner import Regret
    from tilesearch.runner.measure import MeasureSettings, bench
    from tilesearch.target import detect

    op = registry.load("gemm")
    target = detect()

    def measure(size: int, dispatched: dict[str, Any], best_config: dict[str, Any]) -> Regret:
        problem = op.problem(**{**params, "m": size})
        best = load(op="gemm", storage=storage, cache_dir=cache, **problem.to_dict())
        static = op.build(problem, dispatched, target)
        gen = torch.Generator(device="cuda").manual_seed(size)
        a, b = op.make_inputs(problem, "cuda", gen)
        outs = [op.make_outputs(problem, "cuda")[0] for _ in range(4)]
        bk = b if params["layout"] == "nn" else b.t()
        fns = [lambda: kernel(a, b, out=outs[0]), lambda: best(a, b, out=outs[1]),
               lambda: torch.matmul(a, bk, out=outs[2]), lambda: static(a, b, outs[3])]
        ref = op.reference(problem, (a, b))[0]
        for fn in fns:
            fn()
        errors = [((o.double() - ref).norm() / ref.norm()).item() for o in outs]
        ms = bench(fns, MeasureSettings(), torch.cuda.get_device_properties(0).L2_cache_size)
        wrong = "WRONG " if max(errors[0], errors[3]) > op.tolerance(problem, dispatched).rel_fro else ""
        note = (f"{wrong}errors vs float64 (dispatched, best, torch, static): "
                + ", ".join(f"{e:.1e}" for e in errors)
                + f"; the dispatched configuration compiled for m={size}: {ms[3]:.4g} ms")
        return Regret(size, -1, ms[0], ms[1], baseline_ms=ms[2], how="timed", note=note)

    return measure


def part_b(args: Any, log: Any) -> list[dict[str, Any]]:
    from tilesearch.deploy import load
    from tilesearch.deploy.dispatch import export_range
    from tilesearch.range_cli import report
    from tilesearch.range_tuner import RangeSettings, certify, summary, tune_range
    from tilesearch.tuner import TuneSettings

    rows = []
    settings = TuneSettings(strategy="xgb", trials=args.trials, storage=args.storage, progress=False)
    for pair in args.pairs.split(","):
        n, k = (int(v) for v in pair.split("x"))
        params = {"n": n, "k": k, "dtype": "bfloat16", "layout": "nt"}
        row: dict[str, Any] = {"pair": pair}
        try:
            start = time.perf_counter()
            result = tune_range("gemm", {"m": "1..16384", **params}, settings=settings,
                                ranges=RangeSettings(sizes=args.sizes, heldout=args.heldout,
                                                                    refine=getattr(args, "refine", 3)))
            draft = Path(args.work) / f"range-{pair}-draft"
            export_range(result, draft)
            kernel = load(draft)
            certified = certify(result, settings=settings, heldout=args.heldout,
                                measure=timed_regret(kernel, params, args.storage, Path(args.work) / "kernels"))
            meta = export_range(certified, Path(args.work) / f"range-{pair}")
            log(report(certified))
            row.update(wrong=sum(r.note.startswith("WRONG") for r in certified.heldout),
                       buckets=len(certified.buckets), tuned=[s for s in certified.studies if s not in certified.probes],
                       probes=list(certified.probes),
                       seconds=round(time.perf_counter() - start), **summary(certified.heldout),
                       heldout=meta["heldout"])
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {exc}"
            log(traceback.format_exc())
        log(json.dumps(row, default=str))
        rows.append(row)
    return rows


def part_c(args: Any, log: Any) -> list[dict[str, Any]]:
    import llama_mlp

    try:
        llama_mlp.tune_ranges(args.storage, llama_mlp.HIDDEN, llama_mlp.INTERMEDIATE, "bfloat16",
                              trials=args.trials, sizes=args.mlp_sizes, heldout=0)
        rows = llama_mlp.main(storage=args.storage, cache_dir=str(Path(args.work) / "kernels"))
    except Exception as exc:  # noqa: BLE001
        log(traceback.format_exc())
        return [{"error": f"{type(exc).__name__}: {exc}"}]
    for row in rows:
        log(json.dumps(row))
    return rows


def table(results: dict[str, Any]) -> str:
    lines = []
    for row in results.get("a", []):
        status = row.get("error") or (
            f"eager={row['eager']} compile={row['compile']} graph={row['graph']} launches={row['launches']} "
            f"{row['latency_ms']:.4g} ms {row['speedup'] or 0:.2f}x")
        lines.append(f"a {row['op']:<10} {row['problem']:<48} {status}")
    for row in results.get("b", []):
        if "error" in row:
            lines.append(f"b {row['pair']:<12} {row['error']}")
            continue
        med, mx, vs = row["median_regret"], row["max_regret"], row["geomean_vs_baseline"]
        lines.append(f"b {row['pair']:<12} buckets={row['buckets']} tuned={row['tuned']} held-out={row['measured']} "
                     f"wrong={row['wrong']} "
                     f"regret median {100 * (med or 0):.1f}% max {100 * (mx or 0):.1f}% "
                     f"vs torch.matmul {vs or 0:.2f}x ({row['seconds']} s)")
    for row in results.get("c", []):
        if "error" in row:
            lines.append(f"c {row['error']}")
            continue
        ways = [k.removesuffix(" ms") for k in row if k.endswith(" ms")]
        lines.append(f"c batch {row['batch']:>5}: " + ", ".join(
            f"{w} {row[w + ' ms']:.3f} ms ({row[w + ' err']:.0e})" for w in ways))
    return "\n".join(lines)


def check(args: Any) -> int:
    """The parts of ``args.parts``; results merge into ``deploy_check.json`` under ``args.out``."""
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    args.storage = f"sqlite:///{work / 'deploy.db'}"
    os.environ.setdefault("TILESEARCH_KERNELS", str(work / "kernels"))
    log_file = open(out / "deploy_check.log", "a")

    def log(text: str) -> None:
        print(text, flush=True)
        log_file.write(text + "\n")
        log_file.flush()

    from tilesearch.range_tuner import log as range_log

    class ToLog(logging.Handler):  # each range size as it is tuned: a part runs for minutes
        def emit(self, record: logging.LogRecord) -> None:
            log(time.strftime("[%H:%M:%S] ") + record.getMessage())

    range_log.addHandler(ToLog())
    range_log.setLevel(logging.INFO)
    results_path = out / "deploy_check.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for part in args.parts.split(","):
        start = time.perf_counter()
        log(f"--- part {part}")
        results[part] = {"a": part_a, "b": part_b, "c": part_c}[part](args, log)
        log(f"--- part {part}: {time.perf_counter() - start:.0f} s")
        results_path.write_text(json.dumps(results, indent=2, default=str))
    log(table(results))
    return 0

