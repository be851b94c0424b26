"""Records a replay dataset: every valid configuration of a GEMM sub-space, measured on this GPU.

Usage (on the GPU host)::

    python experiments/record_dataset.py --shapes 8192x8192x8192:float16 --out $OUT

For each shape it tunes the sub-space :data:`SUBSPACE` with the real builder and runner,
visiting every valid configuration once (``strategy=random``: the same list as ``grid`` in a
seeded shuffle, so that a run cut short by ``--deadline`` leaves an unbiased sample and clock
drift does not line up with any knob), then writes the study's records as a dataset
(``tilesearch.dataset``) to ``$OUT/<op>_<m>x<n>x<k>_<dtype>_<layout>_<gpu>.jsonl.gz``.

Trials are kept in ``--storage`` (default ``sqlite:///recordings.sqlite`` in the current
directory, which a warm GPU host keeps between calls), so rerunning the same command after a
deadline resumes where it stopped and measures nothing twice; the storage file is copied to
``$OUT`` at the end. The last thing printed is a table, one line per shape.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tilesearch import dataset, registry, tune, versions
from tilesearch.database import TuningDatabase
from tilesearch.report import table
from tilesearch.runner import LocalRunner, MeasureSettings
from tilesearch.strategy import create
from tilesearch.strategy.until import Until
from tilesearch.target import Target

SUBSPACE = {
    "block_m": (64, 128, 256),
    "block_n": (64, 128, 256),
    "block_k": (32, 64),
    "num_stages": (2, 3, 4),
    "threads": (128, 256),
    "panel_size": (0, 8),
    "warp_policy": ("square", "full_row", "full_col"),
}


def parse_shapes(text: str) -> list[dict]:
    """``8192x8192x8192:float16,1024x1024x14336`` -> problem parameter dicts (dtype default float16)."""
    shapes = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        match = re.fullmatch(r"(\d+)x(\d+)x(\d+)(?::(\w+))?", item)
        if not match:
            raise SystemExit(f"bad shape {item!r}; expected MxNxK or MxNxK:dtype, e.g. 4096x4096x4096:bfloat16")
        m, n, k, dtype = match.groups()
        shapes.append({"m": int(m), "n": int(n), "k": int(k), "dtype": dtype or "float16"})
    return shapes


def slug(text: str) -> str:
    text = re.sub(r"^nvidia\s+", "", text.strip().lower())
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_") or "gpu"


def commit() -> str:
    """The tilesearch commit measured: ``$TILESEARCH_COMMIT``, else ``git rev-parse HEAD``."""
    if os.environ.get("TILESEARCH_COMMIT"):
        return os.environ["TILESEARCH_COMMIT"]
    try:
        root = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def record(params: dict, args: argparse.Namespace, deadline: float) -> dict:
    op = registry.load("gemm")
    problem = op.problem(**params)
    space = dataset.sweep(op.space(problem, Target.from_arch(args.arch)), SUBSPACE)
    valid = space.count_valid()
    measure = MeasureSettings(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, seed=0)
    runner = LocalRunner(timeout=args.run_timeout, settings=measure)
    study = f"sweep:{problem.op}[{problem.key}]@{versions.tag()}"
    strategy = Until(create("random", 0), lambda _: time.monotonic() > deadline)
    start = time.perf_counter()
    result = tune(
        "gemm", problem, space=space, strategy=strategy, runner=runner, storage=args.storage, study=study,
        trials=valid, build_workers=args.workers, progress=not args.quiet, arch=args.arch,
    )
    wall = time.perf_counter() - start
    db = TuningDatabase(args.storage, result.study)
    attrs = db.study.user_attrs
    meta = dataset.header(
        op=problem.op, problem=problem.to_dict(), problem_key=problem.key, target=attrs["target"],
        knobs=SUBSPACE, valid_configs=valid, versions=attrs.get("versions", {}),
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), commit=commit(),
        measure={**vars(measure), "build_workers": result_workers(args), "strategy": "random(seed=0)"},
        notes="recorded by experiments/record_dataset.py",
    )
    rows = dataset.rows_from_records(db.records())
    name = f"{problem.op}_{params['m']}x{params['n']}x{params['k']}_{problem['dtype']}_{problem['layout']}"
    path = Path(args.out) / f"{name}_{slug(attrs['target']['gpu'])}.jsonl.gz"
    data = dataset.write(path, meta, rows)
    ok = data.ok_rows()
    best = data.best() if ok else None
    counts: dict[str, int] = {}
    for row in data.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return {
        "shape": name, "valid": valid, "recorded": len(data), "ok": len(ok),
        "failed": ", ".join(f"{k}:{v}" for k, v in sorted(counts.items()) if k != "ok") or "-",
        "best_tflops": best.tflops if best else None,
        "torch_tflops": (best.tflops / best.speedup) if best and best.speedup else None,
        "within_3pct": sum(1 for r in ok if r.latency_ms <= best.latency_ms / 0.97) if best else 0,
        "wall_s": wall, "per_min": result.compile_per_min, "gpu_idle": result.gpu_idle, "file": str(path),
        "best": " ".join(f"{k}={v}" for k, v in best.config.items()) if best else "-",
    }


def result_workers(args: argparse.Namespace) -> int:
    from tilesearch.builder.local import default_workers

    return args.workers or default_workers()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", required=True, help="MxNxK[:dtype],... (dtype float16 or bfloat16)")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"), help="where datasets go (default $OUT)")
    parser.add_argument("--storage", default="sqlite:///recordings.sqlite", help="Optuna storage for the trials")
    parser.add_argument("--deadline", type=float, default=450.0,
                        help="seconds after which no new configuration is started (rerun to resume)")
    parser.add_argument("--workers", type=int, default=0, help="compile processes (0: all cores but one)")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="GPU time of the timed runs per config")
    parser.add_argument("--warmup-ms", type=float, default=10.0)
    parser.add_argument("--run-timeout", type=float, default=60.0)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.deadline
    summary = []
    for params in shapes:
        if time.monotonic() > deadline:
            print(f"deadline passed: {params} not started; rerun to record it", file=sys.stderr)
            continue
        summary.append(record(params, args, deadline))
        print(f"wrote {summary[-1]['file']}", file=sys.stderr)
    if args.storage.startswith("sqlite:///"):
        db_file = Path(args.storage.removeprefix("sqlite:///"))
        if db_file.exists() and db_file.resolve().parent != Path(args.out).resolve():
            shutil.copy(db_file, Path(args.out) / db_file.name)
    header = ["shape", "valid", "recorded", "ok", "failed", "best_tflops", "torch_tflops", "within_3pct", "wall_s",
              "per_min", "gpu_idle"]
    print()
    print(table([[s[h] for h in header] for s in summary], header))
    for s in summary:
        print(f"best {s['shape']}: {s['best']}")
    incomplete = [s["shape"] for s in summary if s["recorded"] < s["valid"]] + [
        "{m}x{n}x{k}:{dtype}".format(**p) for p in shapes[len(summary):]]
    if incomplete:
        print(f"incomplete (deadline): {', '.join(incomplete)}; rerun the same command to resume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
