"""Records a replay dataset: configurations of an op's knob space, measured on this GPU.

The recording mode of the experiment runner; ``experiments/record_dataset.py`` is its command
line. Usage (on the GPU host)::

    # every valid configuration of the 7-knob GEMM sub-space (the committed datasets)
    python experiments/record_dataset.py --shapes 8192x8192x8192:float16 --out $OUT
    # the full GEMM space: 1,600 configurations drawn uniformly, then every configuration one
    # knob away from the 8 best of them (issue 19's datasets)
    python experiments/record_dataset.py --space full --sample 1600 --neighbours 8 \
        --problems "m=1024 n=1024 k=1024; m=4096 n=14336 k=4096 layout=nt" --out $OUT
    # einsum-sum: every valid configuration of its space
    python experiments/record_dataset.py --op einsum_sum --space full \
        --problems "t=8192 k=8192 h=16 d=128 dtype=bfloat16" --out $OUT

For each problem it tunes with the real builder and runner. A sweep (``--sample 0``) visits
every valid configuration once (``strategy=random``: the same list as ``grid`` in a seeded
shuffle, so that a run cut short by ``--deadline`` leaves an unbiased sample and clock drift
does not line up with any knob). A sample (``--sample N``) first measures ``N`` valid
configurations drawn uniformly without replacement (seeded by ``--seed``, in that random
order), then every valid configuration that differs in one knob from the ``--neighbours`` best
of them, so that the best is well established; the header's ``sample`` says so (dataset format
version 2, ``experiments/data/README.md``). Each row has its compile and measure seconds. The
file goes to ``$OUT/<op>_<problem>_<gpu>.jsonl.gz`` (GEMM: ``gemm_<m>x<n>x<k>_<dtype>_<layout>``).

Trials are kept in ``--storage`` (default ``sqlite:///recordings.sqlite`` in the current
directory, which a warm GPU host keeps between calls), so rerunning the same command after a
deadline resumes where it stopped and measures nothing twice (the sample is drawn again from
the same seed, the neighbours from the same measurements); the storage file is copied to
``$OUT`` at the end. The last thing printed is a table, one line per problem.

``--dry-run`` records with made-up latencies (``tilesearch.testing.synthetic``) and no
compilation, on a CPU: for testing this script; its files say SYNTHETIC and their GPU is
``synthetic``, so the benchmarks refuse them as data.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from tilesearch import dataset, registry, tune, versions
from tilesearch.builder import NullBuilder
from tilesearch.database import StorageError, TuningDatabase
from tilesearch.op import Problem
from tilesearch.report import table
from tilesearch.runner import LocalRunner, MeasureSettings
from tilesearch.space import Config, config_key
from tilesearch.strategy import GridStrategy, SearchContext, create
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
    """``8192x8192x8192:float16,1024x1024x14336`` -> GEMM problem parameter dicts (dtype default float16)."""
    shapes = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        match = re.fullmatch(r"(\d+)x(\d+)x(\d+)(?::(\w+))?", item)
        if not match:
            raise SystemExit(f"bad shape {item!r}; expected MxNxK or MxNxK:dtype, e.g. 4096x4096x4096:bfloat16")
        m, n, k, dtype = match.groups()
        shapes.append({"m": int(m), "n": int(n), "k": int(k), "dtype": dtype or "float16"})
    return shapes


def parse_problems(text: str, op: str = "gemm") -> list[tuple[str, dict]]:
    """``m=1024 n=1024 k=1024; einsum_sum: t=8192 k=8192 h=16 d=128`` -> (op, problem parameter
    dict) pairs: an entry names its op before a colon, else it is ``op``; numbers become int
    (the op checks names and values)."""
    problems = []
    for item in filter(None, (s.strip() for s in text.split(";"))):
        name, colon, rest = item.partition(":")
        entry_op, item = (name.strip(), rest) if colon else (op, item)
        pairs = [p.partition("=") for p in item.split()]
        bad = [k for k, eq, v in pairs if not eq or not k or not v]
        if bad or not pairs:
            raise SystemExit(f"bad problem {item!r}; expected [OP:] KEY=VALUE pairs, e.g. m=1024 n=1024 k=1024 layout=nt")
        problems.append((entry_op, {k: int(v) if v.isdigit() else v for k, _, v in pairs}))
    return problems


class Listed(GridStrategy):
    """The configurations given, in their order (skipping what is measured or in flight)."""

    name = "listed"

    def __init__(self, configs: list[Config]) -> None:
        super().__init__(0)
        self.configs = configs

    def order(self, context: SearchContext) -> list[dict]:
        return self.configs


def plan_sample(valid: list[Config], size: int, seed: int) -> list[Config]:
    """``size`` of the ``valid`` configurations drawn uniformly without replacement, in the order drawn."""
    return random.Random(seed).sample(valid, min(size, len(valid)))


def problem_name(problem: Problem) -> str:
    p = problem.to_dict()
    if problem.op == "gemm":
        return f"gemm_{p['m']}x{p['n']}x{p['k']}_{p['dtype']}_{p['layout']}"
    ints = "x".join(f"{k}{v}" for k, v in p.items() if isinstance(v, int) and not isinstance(v, bool))
    rest = "_".join(str(v) for v in p.values() if not isinstance(v, int) or isinstance(v, bool))
    return f"{problem.op}_{ints}_{rest}".strip("_")


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


def record(op_name: str, params: dict, args: argparse.Namespace, deadline: float) -> dict:
    op = registry.load(op_name)
    problem = op.problem(**params)
    target = Target.from_arch(args.arch, **({"gpu": "synthetic"} if args.dry_run else {}))
    space = op.space(problem, target)
    if args.space == "sub":
        if op_name != "gemm":
            raise SystemExit("--space sub is the 7-knob GEMM sub-space; use --space full for other ops")
        space = dataset.sweep(space, SUBSPACE)
    valid_configs = list(space.enumerate())
    knobs = {k.name: list(k.values()) for k in space.knobs}
    measure = MeasureSettings(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, seed=0)
    if args.write_only:  # nothing is measured: the storage's trials are written out as they are
        runner = builder = contextlib.nullcontext()
    elif args.dry_run:
        from tilesearch.testing.synthetic import SyntheticRunner, default_latency, gemm_latency

        made_up = (lambda c: gemm_latency(problem.to_dict(), c, target)) if op_name == "gemm" else default_latency
        runner, builder = SyntheticRunner(made_up, target=target), NullBuilder()
    else:
        from tilesearch.builder.local import LocalBuilder

        runner = LocalRunner(timeout=args.run_timeout, settings=measure)
        builder = LocalBuilder(args.workers or None, batch=args.batch)
    study = f"sweep:{problem.op}[{problem.key}]@{versions.tag()}" + (
        f":sample{args.sample}+{args.neighbours}@{args.seed}" if args.sample else "")

    if args.write_only:
        try:
            TuningDatabase(args.storage, study, read_only=True).close()
        except StorageError as exc:
            raise SystemExit(f"--write-only: {exc}; give the --storage and the same --sample, "
                             "--neighbours and --seed that recorded it") from None

    def measure_all(strategy, trials: int):
        if args.write_only:  # what the storage holds stands for the measurements
            return SimpleNamespace(study=study, compile_per_min=None, gpu_idle=None)
        return tune(op_name, problem, space=space, strategy=Until(strategy, lambda _: time.monotonic() > deadline),
                    runner=runner, builder=builder, storage=args.storage, study=study, trials=trials,
                    build_workers=args.workers, progress=not args.quiet, arch=args.arch)

    start = time.perf_counter()
    sample = None
    with runner, builder:  # one GPU worker and compile pool for both passes (the sample, then its best's neighbours)
        if not args.sample:
            result = measure_all(create("random", 0), len(valid_configs))
        else:
            drawn = plan_sample(valid_configs, args.sample, args.seed)
            result = measure_all(Listed(drawn), len(drawn))
            db = TuningDatabase(args.storage, result.study, read_only=args.write_only)
            rows = {config_key(r.config): r for r in dataset.rows_from_records(db.records())}
            db.close()
            measured = [rows[config_key(c)] for c in drawn if config_key(c) in rows]
            best = sorted((r for r in measured if r.ok), key=lambda r: r.latency_ms)[:args.neighbours]
            plan = list({config_key(c): c for c in drawn + [n for r in best for n in space.neighbours(r.config)]}.values())
            if len(measured) == len(drawn):  # the neighbours of the best are known once the sample is
                result = measure_all(Listed(plan), len(plan))
            sample = {"method": "uniform+neighbours", "seed": args.seed, "uniform": len(drawn),
                      "neighbours_of": args.neighbours, "planned": len(plan if len(measured) == len(drawn) else drawn)}
    wall = time.perf_counter() - start
    db = TuningDatabase(args.storage, result.study, read_only=args.write_only)
    attrs = db.study.user_attrs
    how = "random(seed=0)" if not args.sample else f"uniform sample of {args.sample} (seed {args.seed}) + neighbours"
    meta = dataset.header(
        op=problem.op, problem=problem.to_dict(), problem_key=problem.key, target=attrs["target"],
        knobs=knobs, valid_configs=len(valid_configs), versions=attrs.get("versions", {}),
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), commit=commit(),
        measure={**vars(measure), "build_workers": result_workers(args), "strategy": how},
        notes="recorded by experiments/record_dataset.py" + (
            "; SYNTHETIC: --dry-run, made-up latencies from tilesearch.testing.synthetic, not measurements"
            if args.dry_run else "") + ("; written by --write-only from the storage, as far as it got" if args.write_only else ""),
        sample=sample,
    )
    rows = dataset.rows_from_records(db.records())
    db.close()  # SQLite checkpoints now, not when garbage collection finds the engine in a later command
    name = problem_name(problem)
    path = Path(args.out) / f"{name}_{slug(attrs['target']['gpu'])}.jsonl.gz"
    data = dataset.write(path, meta, rows)
    ok = data.ok_rows()
    best = data.best() if ok else None
    counts: dict[str, int] = {}
    for row in data.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    compile_s = [r.compile_s for r in data.rows if r.compile_s]
    measure_s = [r.measure_s for r in data.rows if r.measure_s]
    return {
        "shape": name, "valid": len(valid_configs), "planned": (sample or {}).get("planned", len(valid_configs)),
        "recorded": len(data), "ok": len(ok),
        "failed": ", ".join(f"{k}:{v}" for k, v in sorted(counts.items()) if k != "ok") or "-",
        "best_tflops": best.tflops if best else None,
        "torch_tflops": (best.tflops / best.speedup) if best and best.speedup else None,
        "within_3pct": sum(1 for r in ok if r.latency_ms <= best.latency_ms / 0.97) if best else 0,
        "compile_s": sum(compile_s) / len(compile_s) if compile_s else None,
        "measure_s": sum(measure_s) / len(measure_s) if measure_s else None,
        "wall_s": wall, "per_min": result.compile_per_min, "gpu_idle": result.gpu_idle, "file": str(path),
        "complete": data.meta["complete"],
        "best": " ".join(f"{k}={v}" for k, v in best.config.items()) if best else "-",
    }


def result_workers(args: argparse.Namespace) -> int:
    from tilesearch.builder.local import default_workers

    return args.workers or default_workers()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="gemm", help="operator of the --problems that name none (gemm, einsum_sum, ...)")
    parser.add_argument("--shapes", default="", help="GEMM shorthand: MxNxK[:dtype],... (dtype float16 or bfloat16)")
    parser.add_argument("--problems", default="",
                        help="problems as [OP:] KEY=VALUE pairs, separated by ';' (OP default --op)")
    parser.add_argument("--space", choices=("sub", "full"), default="sub",
                        help="sub: the 7-knob GEMM sub-space of the committed datasets; full: the op's whole space")
    parser.add_argument("--sample", type=int, default=0,
                        help="draw this many valid configurations uniformly (0: every valid configuration)")
    parser.add_argument("--neighbours", type=int, default=8,
                        help="with --sample: add every configuration one knob away from this many best")
    parser.add_argument("--seed", type=int, default=0, help="seeds the sample")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"), help="where datasets go (default $OUT)")
    parser.add_argument("--storage", default="sqlite:///recordings.sqlite", help="Optuna storage for the trials")
    parser.add_argument("--deadline", type=float, default=450.0,
                        help="seconds after which no new configuration is started (rerun to resume)")
    parser.add_argument("--workers", type=int, default=0, help="compile processes (0: all cores but one)")
    # A recording is measure-bound (on the H200 host: 56 configurations a minute recorded, 208 a
    # minute compiled in batches of 8), and tune keeps workers x batch configurations in flight,
    # all of which are measured after --deadline: with batches of 16, the 240 in flight ran on
    # for more than 160 s past it and a call hit its 600 s limit. Batches of 4 keep about 64.
    parser.add_argument("--batch", type=int, default=4, help="configurations a compile worker takes at once")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="GPU time of the timed runs per config")
    parser.add_argument("--warmup-ms", type=float, default=10.0)
    parser.add_argument("--run-timeout", type=float, default=60.0)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--dry-run", action="store_true",
                        help="made-up latencies, no compilation, no GPU (tests this script; files say SYNTHETIC)")
    parser.add_argument("--write-only", action="store_true",
                        help="measure nothing: write the datasets of what --storage holds (no GPU; "
                             "e.g. a storage brought back from a call that ran out of time)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    problems = [("gemm", p) for p in parse_shapes(args.shapes)] + parse_problems(args.problems, args.op)
    if not problems:
        parser.error("give --shapes or --problems")
    if args.batch < 1:
        parser.error(f"--batch must be at least 1, got {args.batch}")
    if args.shapes and args.op != "gemm":
        parser.error("--shapes is for --op gemm; use --problems")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.deadline
    summary = []
    for op_name, params in problems:
        if time.monotonic() > deadline:
            print(f"deadline passed: {op_name} {params} not started; rerun to record it", file=sys.stderr)
            continue
        try:
            summary.append(record(op_name, params, args, deadline))
        except SystemExit as exc:  # a refusal with its one line: exit code 2, as the parser's
            if not isinstance(exc.code, str):
                raise
            print(f"record_dataset: {exc.code}", file=sys.stderr)
            return 2
        print(f"wrote {summary[-1]['file']}", file=sys.stderr)
    if args.storage.startswith("sqlite:///") and not args.write_only:
        db_file = Path(args.storage.removeprefix("sqlite:///"))
        if db_file.exists() and db_file.resolve().parent != Path(args.out).resolve():
            shutil.copy(db_file, Path(args.out) / db_file.name)
    header = ["shape", "valid", "planned", "recorded", "ok", "failed", "best_tflops", "torch_tflops", "within_3pct",
              "compile_s", "measure_s", "wall_s", "per_min", "gpu_idle"]
    print()
    print(table([[s[h] for h in header] for s in summary], header))
    for s in summary:
        print(f"best {s['shape']}: {s['best']}")
    incomplete = [s["shape"] for s in summary if not s["complete"]] + [
        f"{o}: " + " ".join(f"{k}={v}" for k, v in p.items()) for o, p in problems[len(summary):]]
    if incomplete:
        again = "rerun it without --write-only on the GPU" if args.write_only else "rerun the same command"
        print(f"incomplete (deadline): {', '.join(incomplete)}; {again} to resume")
    return 0

