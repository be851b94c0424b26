"""Memory across hundreds of GEMM kernels, and fault isolation on real bad kernels, in one GPU call.

Phases (all by default):

- ``leak``: tunes GEMM 2048^3 float16 over 320 random configurations, each compiled from an empty
  TileLang cache and measured, with the runner's worker never recycled (``recycle_after=0``), so
  that any growth shows. After every 10th kernel (and the first 5) it records, inside the
  worker: torch's allocated and reserved CUDA memory, the device's used memory
  (``mem_get_info``), the worker's RSS and the kernels TileLang keeps in memory; from outside:
  ``nvidia-smi``'s per-process GPU memory of the worker and of the tuning process, and the
  tuning process's RSS. The tuning process itself must hold no CUDA context.
- ``leak-default``: the same 320 configurations (TileLang's cache now holds them: measuring
  only) with the runner as tune() makes it (its worker recycled every 200 kernels).
- ``faults``: ``tilesearch.testing.faulty:FaultyOp`` on the GPU, every fault x 2 block sizes
  (10 kernels): each must end with its status (run_timeout, runtime_error, wrong_result,
  compile_error) and the best must be a correct kernel.

Writes ``$OUT/leak_raw.csv``, ``$OUT/leak_default.csv``, ``$OUT/faults.json``,
``$OUT/summary.json`` and the studies (``$OUT/fault_and_leak.db``); prints a table last.
Takes about 4-5 minutes on an H100 with 16 cores.

The work of ``experiments/fault_and_leak.py``.
"""

import csv
import json
import os
import time
from pathlib import Path

from tilesearch.experiment.cache import empty_tilelang_cache

LEAK_OP, LEAK_PROBLEM = "gemm", {"m": 2048, "n": 2048, "k": 2048, "dtype": "float16"}
FAULT_OP, FAULT_PROBLEM = "tilesearch.testing.faulty:FaultyOp", {"n": 1 << 24}
PROBE = "tilesearch.testing.memory:probe"
METRICS = ("allocated_mb", "reserved_mb", "device_used_mb", "worker_rss_mb", "worker_smi_mb",
           "tuner_rss_mb", "tuner_smi_mb", "tilelang_kernels_in_memory")


def probed_runner(rows, every, **kwargs):
    from tilesearch.runner import LocalRunner
    from tilesearch.testing import memory

    class ProbedRunner(LocalRunner):
        """A LocalRunner that records the memory figures after each kernel it measures."""

        def run(self, candidate, incumbent=None):
            result = super().run(candidate, incumbent)
            n = len(self.seen) + 1
            self.seen.append(candidate.key)
            if n <= 5 or n % every == 0:
                figures = self.call(PROBE)
                smi = memory.gpu_mb_by_pid()
                rows.append({
                    "kernel": n, "status": result.status.value, "worker_pid": figures["pid"],
                    "allocated_mb": figures["allocated_mb"], "reserved_mb": figures["reserved_mb"],
                    "device_used_mb": figures["device_used_mb"], "worker_rss_mb": figures["rss_mb"],
                    "worker_smi_mb": smi.get(figures["pid"]), "tuner_rss_mb": memory.rss_mb(),
                    "tuner_smi_mb": smi.get(os.getpid(), 0.0),
                    "tilelang_kernels_in_memory": figures["tilelang_kernels_in_memory"],
                    "smi_pids": len(smi),
                })
            return result

    runner = ProbedRunner(**kwargs)
    runner.seen = []
    return runner


def slope_per_100(rows, metric, start=50):
    """Least-squares growth of ``metric`` in units per 100 kernels, from kernel ``start`` on."""
    pts = [(r["kernel"], r[metric]) for r in rows if r["kernel"] >= start and r.get(metric) is not None]
    if len(pts) < 3:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    var = sum((x - mx) ** 2 for x, _ in pts)
    return 100 * sum((x - mx) * (y - my) for x, y in pts) / var if var else None


def leak(args, storage, out, recycle, name):
    import tilesearch
    from tilesearch.runner import MeasureSettings

    rows = []
    kwargs = {"settings": MeasureSettings(warmup_ms=10, rep_ms=40, baseline=False)}
    if not recycle:
        kwargs["recycle_after"] = 0
    runner = probed_runner(rows, 10, **kwargs)
    start = time.perf_counter()
    with runner:
        result = tilesearch.tune(LEAK_OP, LEAK_PROBLEM, runner=runner, strategy="random", seed=7,
                                 trials=args.kernels, storage=storage, study=f"leak-{name}", progress=False)
    wall = time.perf_counter() - start
    with open(out / f"leak_{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = {
        "kernels": len(runner.seen), "statuses": result.statuses, "wall_s": wall,
        "worker_restarts": len({r["worker_pid"] for r in rows}) - 1,
        "first": {m: rows[0].get(m) for m in METRICS}, "last": {m: rows[-1].get(m) for m in METRICS},
        "max": {m: max((r[m] for r in rows if r.get(m) is not None), default=None) for m in METRICS},
        "slope_per_100_kernels": {m: slope_per_100(rows, m) for m in METRICS},
        "tuner_holds_cuda_context": any(r["tuner_smi_mb"] for r in rows),
        "nvidia_smi_sees_pids": max(r["smi_pids"] for r in rows),
    }
    print(f"[{name}] {json.dumps(summary, default=str)}", flush=True)
    return summary


def faults(args, storage, out):
    import tilesearch
    from tilesearch.runner import LocalRunner
    from tilesearch.space import Categorical, Space
    from tilesearch.testing.faulty import EXPECTED_STATUS, FAULTS

    space = Space([Categorical("fault", FAULTS), Categorical("block", (256, 1024)), Categorical("threads", (128,))])
    start = time.perf_counter()
    with LocalRunner(timeout=args.run_timeout) as runner:
        result = tilesearch.tune(FAULT_OP, FAULT_PROBLEM, space=space, runner=runner, strategy="grid",
                                 trials=len(FAULTS) * 2, storage=storage, study="faults", progress=False)
    wall = time.perf_counter() - start
    records = tilesearch.TuningDatabase(storage, "faults").records()
    table = [{"config": r.config, "status": r.status, "expected": EXPECTED_STATUS[r.config["fault"]],
              "latency_ms": r.latency_ms, "error": (r.error or "").strip().splitlines()[0][:160] if r.error else None}
             for r in records]
    best = result.best[0] if result.best else None
    summary = {
        "wall_s": wall, "statuses": result.statuses,
        "all_as_expected": all(row["status"] == row["expected"] for row in table) and len(table) == len(FAULTS) * 2,
        "best": best.config if best else None, "best_is_correct": bool(best and best.config["fault"] == "none"),
        "records": table,
    }
    (out / "faults.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"[faults] {json.dumps({k: v for k, v in summary.items() if k != 'records'}, default=str)}", flush=True)
    return summary


def check(args):
    """The phases of ``args.phases``; writes under ``args.out`` and prints the tables last."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{out / 'fault_and_leak.db'}"
    phases = args.phases.split(",")
    with empty_tilelang_cache("fault-and-leak") as cache:  # empty: every kernel compiles
        summary = {"tilelang_cache": cache}
        if "leak" in phases:
            summary["leak_raw"] = leak(args, storage, out, recycle=False, name="raw")
        if "leak-default" in phases:
            summary["leak_default"] = leak(args, storage, out, recycle=True, name="default")
        if "faults" in phases:
            summary["faults"] = faults(args, storage, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))

    print("\nmemory over the kernels (MiB; slope = growth per 100 kernels from kernel 50 on)")
    print(f"{'run':8} {'metric':28} {'first':>10} {'last':>10} {'max':>10} {'slope':>10}")
    for name in ("leak_raw", "leak_default"):
        if name not in summary:
            continue
        s = summary[name]
        for m in METRICS:
            vals = [s["first"][m], s["last"][m], s["max"][m], s["slope_per_100_kernels"][m]]
            cells = " ".join(f"{v:10.1f}" if isinstance(v, (int, float)) else f"{'-':>10}" for v in vals)
            print(f"{name[5:]:8} {m:28} {cells}")
        print(f"{name[5:]:8} kernels {s['kernels']}, statuses {s['statuses']}, worker restarts "
              f"{s['worker_restarts']}, tuning process holds a CUDA context: {s['tuner_holds_cuda_context']}, "
              f"{s['wall_s']:.0f} s")
    if "faults" in summary:
        f = summary["faults"]
        print("\nfault isolation on the GPU")
        for row in f["records"]:
            mark = "ok " if row["status"] == row["expected"] else "BAD"
            detail = row["error"] or (f"{row['latency_ms']:.4f} ms" if row["latency_ms"] else "")
            print(f"  {mark} {row['config']['fault']:14} block {row['config']['block']:5} -> {row['status']:14} {detail}")
        print(f"  all as expected: {f['all_as_expected']}; best {f['best']} correct: {f['best_is_correct']}; "
              f"{f['wall_s']:.0f} s")

