"""Issue 15 on the GPU: are tilesearch's final ratios reproducible within their intervals?

For each of 5 GEMM shapes, two separate ``tilesearch tune`` runs (fresh processes; the storage
deleted between them, TileLang's compile cache kept) with ``strategy=xgb``; each ends with the
final re-time of its top configurations beside ``torch.matmul``. Reported per run: the chosen
configuration's ratio to ``torch.matmul`` with its 95% interval (target: at most +-1% wide), the
SM clock, power and temperature NVML read around that re-time, the tie set, and whether the two
runs' intervals overlap (target: they do).

Writes ``trust_gpu.json`` and ``trust_gpu.log`` (every tune's output) under ``--out``; prints a
table last. Stops starting runs once ``--budget-s`` is spent and says which were left out.
About 6-7 minutes on an H100 with 16 cores (an estimate: 10 runs of 20 trials; no run starts after
``--budget-s``, 380 s, so it ends within 8 minutes).

usage: source scripts/gpu-host.sh && python experiments/trust_gpu.py --out $OUT
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = {  # name: problem
    "sq8192_fp16_nn": {"m": 8192, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn"},
    "skinny16_bf16_nt": {"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
    "sq4096_bf16_nt": {"m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
    "mlp_2048x14336x4096_bf16_nt": {"m": 2048, "n": 14336, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
    "odd_3000x5000x4000_fp16_nn": {"m": 3000, "n": 5000, "k": 4000, "dtype": "float16", "layout": "nn"},
}


def tune(problem, storage, trials, log):
    """One ``tilesearch tune`` in a fresh process; its output goes to ``log``."""
    args = [sys.executable, "-m", "tilesearch.cli", "tune", "op=gemm", *(f"{k}={v}" for k, v in problem.items()),
            "strategy=xgb", f"trials={trials}", f"storage={storage}", "progress=false"]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    log.write(f"$ {' '.join(args[1:])}\n{done.stdout}{done.stderr}\n(exit {done.returncode}, "
              f"{time.perf_counter() - start:.1f} s)\n\n")
    log.flush()
    return done.returncode, time.perf_counter() - start


def final_of(problem, storage):
    """The chosen configuration's re-timed figures, from the study the run left."""
    from tilesearch import registry
    from tilesearch.database import TuningDatabase, find_studies

    op = registry.load("gemm")
    (name,) = find_studies(storage, "gemm", op.problem(**problem))
    final = TuningDatabase(storage, name).final()
    if final is None or final.chosen is None:
        return {"error": "no final re-time in the study"}
    r = final.chosen.result
    return {"trial": final.chosen.trial, "config": final.chosen.config, "ratio": r.speedup, "low": r.speedup_low,
            "high": r.speedup_high, "half_width": (r.speedup_high - r.speedup_low) / 2 / r.speedup,
            "latency_ms": r.latency_ms, "runs": r.runs, "sm_clock_mhz": r.sm_clock_mhz, "power_w": r.power_w,
            "temp_c": r.temp_c, "throttled": r.throttled, "ties": list(final.ties), "together": final.together}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--budget-s", type=float, default=380.0, help="start no run after this many seconds")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="trust-gpu-"))  # studies: not under --out
    start = time.perf_counter()
    rows, skipped = [], []
    with open(out / "trust_gpu.log", "w") as log:
        for shape in args.shapes.split(","):
            for run in (1, 2):
                if time.perf_counter() - start > args.budget_s:
                    skipped.append(f"{shape} run {run}")
                    continue
                db = scratch / f"{shape}.db"
                db.unlink(missing_ok=True)  # the storage cleared between the two runs
                storage = f"sqlite:///{db}"
                code, wall = tune(SHAPES[shape], storage, args.trials, log)
                row = {"shape": shape, "run": run, "exit": code, "wall_s": round(wall, 1)}
                row.update(final_of(SHAPES[shape], storage) if code == 0 else {"error": f"tune exited {code}"})
                rows.append(row)
                print(json.dumps(row), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    verdicts = {}
    for shape in args.shapes.split(","):
        got = [r for r in rows if r["shape"] == shape and "ratio" in r]
        if len(got) == 2:
            a, b = got
            verdicts[shape] = {"overlap": a["low"] <= b["high"] and b["low"] <= a["high"],
                               "within_1pct": all(r["half_width"] <= 0.01 for r in got)}
    summary = {"trials": args.trials, "runs": rows, "verdicts": verdicts, "skipped": skipped,
               "wall_s": round(time.perf_counter() - start, 1)}
    (out / "trust_gpu.json").write_text(json.dumps(summary, indent=1))

    print(f"\ntrust_gpu: {len(rows)} runs in {summary['wall_s']} s; skipped: {', '.join(skipped) or 'none'}")
    print(f"{'shape':30} run  ratio   95% interval        +-%   runs  sm_MHz  power_W  temp_C  ties  overlap  <=1%")
    for r in rows:
        v = verdicts.get(r["shape"], {})
        if "ratio" not in r:
            print(f"{r['shape']:30} {r['run']:3}  {r.get('error')}")
            continue
        fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
        print(f"{r['shape']:30} {r['run']:3}  {r['ratio']:.3f}  [{r['low']:.3f}, {r['high']:.3f}]  "
              f"{100 * r['half_width']:5.2f}  {r['runs']:5}  {fmt(r['sm_clock_mhz'], '6.0f')}  "
              f"{fmt(r['power_w'], '7.0f')}  {fmt(r['temp_c'], '6.0f')}  {len(r['ties']):4}  "
              f"{str(v.get('overlap', '-')):7}  {v.get('within_1pct', '-')}")


if __name__ == "__main__":
    main()
