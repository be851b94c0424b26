"""Strategy benchmark on replay datasets: how many trials, and how much tuning time, each strategy
needs to find a fast configuration.

The replay benchmark mode of the experiment runner (CPU only, a few minutes):
``experiments/strategy_benchmark.py`` declares what it compares and calls :func:`main`.

For every dataset in ``--data`` and every strategy (``grid``, ``random``, ``tpe``, ``xgb``, and
``xgb+transfer``, warm-started from ONE other dataset: the one of the same op and GPU whose
problem is nearest, by the sum of |log2| differences of the sizes plus 2 per differing dtype or
layout; ``NAME+carver`` proposes TileLang Carver's hints first), it runs the real tuning loop
(:func:`tilesearch.tune` with the replay runner, an in-memory study and batches of ``--batch``
proposals) once per seed, and records the order in which configurations were measured.
``gp`` and ``cmaes`` are Optuna's GPSampler and CmaEsSampler run through the same loop
(``experiments/field_benchmark.py`` compares them, and Kernel Tuner's strategies, with ours).
``--transfer-from all`` also runs ``xgb+transfer`` from each other dataset in turn, in a table
of its own, to show how much the result depends on the choice of the source. Reported, per
dataset and strategy:

- trials to reach 97% and 99% of the dataset's best TFLOP/s: median and quartiles over seeds
  (``>N`` where a run stopped at ``N`` without reaching it), and the median as a share of the
  dataset's size;
- the score of Willemsen et al. (2024): the strategy's best latency found against total tuning
  time, ``(random(t) - found(t)) / (random(t) - optimum)`` averaged over a time range, where
  ``random(t)`` is the expected best of random search without replacement after ``t`` seconds
  (computed from the dataset's order statistics), so 0 is random search and 1 the optimum.
  Tuning time per trial is the recorded compile and measure seconds plus the strategy's own
  time (measured here), summed as if done one after another. The time range runs from where
  random search is expected to reach the ``--cutoff-start`` quantile to where it reaches the
  ``--cutoff`` quantile (target ``optimum + (median - optimum) * (1 - cutoff)``);
- whether issue 3's targets are met (:func:`targets`; ``tests/test_strategy_benchmark.py``
  asserts them on the committed datasets): median trials to 97% for ``xgb`` within 3% of the
  dataset's size, at least 3x fewer than ``random`` and fewer than ``tpe``; for
  ``xgb+transfer`` within 2%.

It writes ``results.md`` (the table), ``results.json`` (every run's trials-to-target) and one
convergence plot per dataset (``convergence_<dataset>.png``: best-so-far against trials, median
over seeds with the quartile band) to ``--out``. ``--synthetic`` benchmarks on made-up datasets
instead (for developing without data; everything it writes says SYNTHETIC).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tilesearch import dataset, registry
from tilesearch.experiment.benchmark_report import markdown, plot
from tilesearch.experiment.replay_runs import TARGETS, Outcome, Run, dataset_space, nearest, run_one, sources
from tilesearch.experiment.scores import score_setup, willemsen_score
from tilesearch.target import Target

STRATEGIES = ("grid", "random", "tpe", "xgb", "xgb+transfer")


def benchmark(datasets: Sequence[dataset.Dataset], args: argparse.Namespace,
              log: Callable[[str], None] = print, run: Callable[..., Run] | None = None) -> list[Outcome]:
    """Every strategy of ``args.strategies`` on every dataset, one run per seed. ``run`` (default
    :func:`run_one`, same arguments) runs one; ``experiments/field_benchmark.py`` passes one that
    also knows other tuners' strategies. With ``args.jobs`` above 1 each (dataset, strategy)
    pair's seeds run in that many processes (each part with a copy of ``run``); every run is seeded and
    single-threaded, so the runs are the same either way, and only their measured overheads
    (part of the score) see the other processes."""
    run = run or run_one
    jobs = getattr(args, "jobs", 1)
    # each strategy's seeds in up to ``jobs`` parts: one strategy (CMA-ES's 30 seeds on the
    # einsum-sum sweep, 11.5 min on 2 cores) would otherwise keep one process busy after the rest
    parts = [range(args.seeds)[i::max(1, jobs)] for i in range(min(max(1, jobs), args.seeds))]

    def submit(*task: Any, **kwargs: Any) -> list[concurrent.futures.Future]:
        return [pool.submit(_seeds, *task, seeds=list(part), **kwargs) for part in parts]

    with executor(jobs) as pool:
        pending = []
        for data in datasets:
            outcome = Outcome(data.name, len(data), data.best().tflops)
            horizon, cap = budget(data, args)
            source = nearest(data, datasets)
            hints = None
            if any("carver" in name for name in args.strategies):
                op = registry.load(data.op)
                hints = op.hints(op.problem(**data.problem), dataset_space(data),
                                 Target.from_dict(data.meta["target"]), kind="carver", n=8)
            common = dict(horizon=horizon, cap=cap, batch=args.batch)
            tasks: dict[str, Any] = {}
            for name in args.strategies:
                if "transfer" in name and source is None:
                    log(f"{data.name}: no other dataset of {data.op} on this GPU to transfer from; skipping {name}")
                    continue
                tasks[name] = submit(run, data, name, hints=hints,
                                     transfer=source.path if "transfer" in name and source else "", **common)
            by_source = {}
            if args.transfer_from == "all":
                for other in sources(data, datasets):
                    if other is source and "xgb+transfer" in tasks:
                        by_source[other.name] = tasks["xgb+transfer"]
                    else:
                        by_source[other.name] = submit(run_one, data, "xgb+transfer", transfer=other.path, **common)
            pending.append((data, outcome, tasks, by_source))
        outcomes = []
        for data, outcome, tasks, by_source in pending:
            setup = score_setup(data, args.cutoff, args.cutoff_start)
            for name, futures in tasks.items():
                outcome.runs[name], seconds = _gathered(futures)
                outcome.scores[name] = [willemsen_score(r, setup) for r in outcome.runs[name]]
                log(f"{data.name} {name}: {args.seeds} runs in {seconds:.1f} s")
            for other, futures in by_source.items():
                outcome.by_source[other], seconds = _gathered(futures)
                log(f"{data.name} xgb+transfer from {other}: {args.seeds} runs in {seconds:.1f} s")
            outcomes.append(outcome)
    return outcomes


def budget(data: dataset.Dataset, args: argparse.Namespace) -> tuple[int, int]:
    """A run's horizon and cap on ``data``: at least ``--horizon`` of the dataset (and
    ``--min-horizon`` trials), at most ``--max-share`` of it (and never below the horizon)."""
    horizon = max(args.min_horizon, math.ceil(args.horizon * len(data)))
    return horizon, max(horizon, math.ceil(args.max_share * len(data)))


def _seeds(run: Callable[..., Run], data: dataset.Dataset, name: str, *, seeds: list[int],
           **kwargs: Any) -> tuple[list[Run], float]:
    """``run`` for each of ``seeds``, and the seconds they took."""
    start = time.perf_counter()
    return [run(data, name, seed, **kwargs) for seed in seeds], time.perf_counter() - start


def _gathered(futures: Sequence[concurrent.futures.Future]) -> tuple[list[Run], float]:
    """The runs of a strategy's parts in seed order, and the seconds they took together. Once a
    seed's run raised, the later seeds count as measuring nothing, as in one process, where
    they are not tried (``field.Runs``: a run that raises may have taken a 2-minute time limit)."""
    parts = [f.result() for f in futures]
    runs = sorted((r for part, _ in parts for r in part), key=lambda r: r.seed)
    raised = next((r for r in runs if r.error), None)
    if raised is not None:
        runs = [r if r.seed <= raised.seed else replace(r, tflops=[], latency_ms=[], cost_s=[], overhead_s=0.0,
                                                         error=raised.error) for r in runs]
    return runs, sum(seconds for _, seconds in parts)


class _InProcess(concurrent.futures.Executor):
    """``jobs=1``: each task runs when submitted, here (patched functions and all)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the result, as a pool does
            future.set_exception(exc)
        return future


def _single_threaded() -> None:
    """A benchmark process's start: one thread each, as the processes share the cores (GP's fits in
    torch would otherwise take all of them in every process)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


def executor(jobs: int) -> concurrent.futures.Executor:
    """Where benchmark runs go: here for one job, else ``jobs`` single-threaded processes."""
    if jobs <= 1:
        return _InProcess()
    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"),
                                                  initializer=_single_threaded)


def synthetic_sets(directory: Path) -> list[dataset.Dataset]:
    from tilesearch.testing.synthetic import synthetic_dataset

    knobs = {"block_m": (64, 128, 256), "block_n": (64, 128, 256), "block_k": (32, 64), "num_stages": (2, 3, 4),
             "threads": (128, 256), "panel_size": (0, 8), "warp_policy": ("square", "full_row", "full_col")}
    shapes = [{"m": 8192, "n": 8192, "k": 8192}, {"m": 4096, "n": 4096, "k": 4096},
              {"m": 1024, "n": 1024, "k": 14336}, {"m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16"}]
    return [synthetic_dataset(directory / "synthetic_{m}x{n}x{k}_{dtype}.jsonl.gz".format(**{"dtype": "float16", **s}),
                              s, knobs) for s in shapes]


def build_parser(strategies: Sequence[str] = STRATEGIES) -> argparse.ArgumentParser:
    """The benchmark's command line; ``strategies`` is the default of ``--strategies``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="experiments/data", help="directory of datasets (*.jsonl.gz)")
    parser.add_argument("--out", default="experiments/results/strategies")
    parser.add_argument("--strategies", default=",".join(strategies),
                        help="comma-separated; NAME+transfer (xgb) and NAME+carver (Carver hints first) also work, "
                             "and gp, cmaes (Optuna's samplers)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="processes to run the seeds of each (dataset, strategy) in (default: one per core)")
    parser.add_argument("--batch", type=int, default=1, help="proposals per round (the pipeline is one round deeper than the compile pool, batch - 1 workers)")
    parser.add_argument("--horizon", type=float, default=0.1,
                        help="run each strategy for at least this share of the dataset (and until 99%% is reached)")
    parser.add_argument("--min-horizon", type=int, default=20)
    parser.add_argument("--max-share", type=float, default=0.3,
                        help="stop a strategy run after this share of the dataset (grid and random run to the end)")
    parser.add_argument("--cutoff", type=float, default=0.96)
    parser.add_argument("--cutoff-start", type=float, default=0.5)
    parser.add_argument("--transfer-from", choices=("nearest", "all"), default="nearest",
                        help="all: also run xgb+transfer from every other dataset, in a table of its own")
    parser.add_argument("--synthetic", action="store_true", help="benchmark on made-up datasets (development only)")
    return parser


def parse_args(argv: list[str] | None = None, strategies: Sequence[str] = STRATEGIES) -> argparse.Namespace:
    args = build_parser(strategies).parse_args(argv)
    args.strategies = [s for s in args.strategies.split(",") if s]
    return args


def main(argv: list[str] | None = None, *, strategies: Sequence[str] = STRATEGIES) -> int:
    """Runs the benchmark (``strategies``: the default list to compare); returns the exit code."""
    args = parse_args(argv, strategies)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.synthetic:
        datasets = synthetic_sets(out / "synthetic_data")
    else:
        datasets = [d for d in dataset.load_dir(args.data) if d.meta.get("gpu") != "synthetic"]
    if not datasets:
        print(f"no datasets in {args.data}; record some with experiments/record_dataset.py (or use --synthetic)",
              file=sys.stderr)
        return 2
    outcomes = benchmark(datasets, args, log=lambda text: print(text, file=sys.stderr))
    for outcome in outcomes:
        plot(outcome, out / f"convergence_{outcome.dataset}.png", args.synthetic)
    text = markdown(outcomes, args.synthetic, args, datasets)
    (out / "results.md").write_text(text)

    def runs_json(runs: list[Run], scores: list[float] | None, best: float) -> list[dict[str, Any]]:
        return [{**{k: v for k, v in asdict(r).items() if k in ("seed", "overhead_s", "transfer")},
                 **{f"trials_to_{round(t * 100)}": r.trials_to(t, best) for t in TARGETS},
                 **({"score": scores[i]} if scores else {})} for i, r in enumerate(runs)]

    raw = {o.dataset: {"size": o.size, "best_tflops": o.best_tflops, "synthetic": args.synthetic,
                       "runs": {name: runs_json(runs, o.scores[name], o.best_tflops) for name, runs in o.runs.items()},
                       **({"transfer_from": {src: runs_json(runs, None, o.best_tflops)
                                             for src, runs in o.by_source.items()}} if o.by_source else {})}
           for o in outcomes}
    (out / "results.json").write_text(json.dumps(raw, indent=1, default=str))
    print(text)
    return 0

