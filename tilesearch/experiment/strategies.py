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
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from tilesearch import dataset, registry, tune
from tilesearch.builder import NullBuilder
from tilesearch.records import Candidate, RunResult
from tilesearch.runner import ReplayRunner
from tilesearch.space import Space
from tilesearch.strategy import GridStrategy, Proposal, SearchContext, Strategy, XGBStrategy, create
from tilesearch.strategy.hints import Hinted
from tilesearch.strategy.sampler import cmaes, gp
from tilesearch.strategy.until import Until
from tilesearch.target import Target

TARGETS = (0.97, 0.99)
STRATEGIES = ("grid", "random", "tpe", "xgb", "xgb+transfer")
OPTUNA_SAMPLERS = {"gp": gp, "cmaes": cmaes}  # Optuna's samplers that are not tilesearch strategies


class Recorder(ReplayRunner):
    """The replay runner, remembering the order in which rows were asked for."""

    def __init__(self, data: dataset.Dataset) -> None:
        super().__init__(data)
        self.seen: list[dataset.Row | None] = []
        self.best_tflops = 0.0

    def run(self, candidate: Candidate) -> RunResult:
        row = self.data.get(candidate.config)
        self.seen.append(row)
        if row is not None and row.ok and row.tflops:
            self.best_tflops = max(self.best_tflops, row.tflops)
        return super().run(candidate)


class Timed(Strategy):
    """Measures the wall time a strategy spends proposing: in all, and per round."""

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0
        self.rounds: list[float] = []

    def sampler(self) -> Any:
        return self.inner.sampler()

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        start = time.perf_counter()
        try:
            return self.inner.propose(context, n)
        finally:
            self.rounds.append(time.perf_counter() - start)
            self.seconds += self.rounds[-1]


@dataclass
class Run:
    """One strategy on one dataset with one seed: figures of the measured rows, in order."""

    strategy: str
    seed: int
    tflops: list[float | None]
    latency_ms: list[float | None]
    cost_s: list[float]
    overhead_s: float
    transfer: str = ""

    def trials_to(self, fraction: float, best: float) -> float:
        """1-based trial at which ``fraction`` of ``best`` TFLOP/s was first reached (inf: never)."""
        for i, t in enumerate(self.tflops, 1):
            if t is not None and t >= fraction * best:
                return float(i)
        return math.inf

    def best_so_far(self, best: float) -> np.ndarray:
        values = np.array([t if t is not None else 0.0 for t in self.tflops], dtype=float)
        return np.maximum.accumulate(values) / best if len(values) else values


@dataclass
class Outcome:
    dataset: str
    size: int
    best_tflops: float
    runs: dict[str, list[Run]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    by_source: dict[str, list[Run]] = field(default_factory=dict)  # xgb+transfer from each other dataset


def make_strategy(name: str, seed: int, transfer: str = "", hints: list | None = None) -> Strategy:
    """``base[+transfer][+carver]``: a registered strategy, ``xgb`` warm-started from ``transfer``,
    seeded with Carver's ``hints``."""
    base, *mods = name.split("+")
    unknown = set(mods) - {"transfer", "carver"} or ({"transfer"} & set(mods) if base != "xgb" else set())
    if unknown:
        raise SystemExit(f"strategy {name!r}: unknown or unsupported modifier {sorted(unknown)}")
    if base == "xgb":
        strategy: Strategy = XGBStrategy(seed, transfer=[transfer] if "transfer" in mods else [], auto_transfer=False)
    elif base in OPTUNA_SAMPLERS:
        strategy = OPTUNA_SAMPLERS[base](seed)
    else:
        strategy = create(base, seed)
    if "carver" in mods:
        strategy = Hinted(strategy, "carver")
        strategy.hints = hints
    return strategy


def _space(data: dataset.Dataset) -> Space:
    op = registry.load(data.op)
    return data.restrict(op.space(op.problem(**data.problem), Target.from_dict(data.meta["target"])))


def _run(name: str, seed: int, rows: Sequence[dataset.Row | None], overhead_s: float, transfer: str = "") -> Run:
    share = overhead_s / max(len(rows), 1)
    return Run(
        strategy=name, seed=seed,
        tflops=[r.tflops if r is not None and r.ok else None for r in rows],
        latency_ms=[r.latency_ms if r is not None and r.ok else None for r in rows],
        cost_s=[(r.compile_s or 0.0) + (r.measure_s or 0.0) + share if r is not None else share for r in rows],
        overhead_s=overhead_s, transfer=Path(transfer).name if transfer else "",
    )


def run_one(data: dataset.Dataset, name: str, seed: int, *, horizon: int, cap: int, batch: int,
            transfer: str = "", hints: list | None = None) -> Run:
    """Runs ``name`` on ``data`` until ``horizon`` trials and 99% of the best are both reached, or
    ``cap`` trials. ``grid`` and ``random`` walk a fixed order of the space, which is read from the
    strategy directly (the tuning loop would measure exactly that order) and walked to the end."""
    strategy = make_strategy(name, seed, transfer, hints)
    if isinstance(strategy, GridStrategy):
        start = time.perf_counter()
        order = strategy.order(SimpleNamespace(space=_space(data)))  # type: ignore[arg-type]
        return _run(name, seed, [data.get(c) for c in order], time.perf_counter() - start)
    runner = Recorder(data)
    best = data.best().tflops
    timed = Timed(strategy)

    def done(_: SearchContext) -> bool:
        return len(runner.seen) >= cap or (len(runner.seen) >= horizon and runner.best_tflops >= max(TARGETS) * best)

    builder = NullBuilder()
    builder.workers = batch - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune(data.op, data.problem, strategy=Until(timed, done), runner=runner, builder=builder, storage=":memory:",
             trials=len(data), seed=seed, progress=False)
    return _run(name, seed, runner.seen, timed.seconds, transfer)


def sources(data: dataset.Dataset, others: Sequence[dataset.Dataset]) -> list[dataset.Dataset]:
    """The datasets ``data`` may transfer from: the same op and GPU, another problem."""
    return [o for o in others if o is not data and o.op == data.op and o.meta.get("gpu") == data.meta.get("gpu")
            and o.problem != data.problem]


def nearest(data: dataset.Dataset, others: Sequence[dataset.Dataset]) -> dataset.Dataset | None:
    """The other dataset of the same op and GPU whose problem is closest (log2 of the sizes,
    then dtype and layout)."""

    def distance(other: dataset.Dataset) -> float:
        a, b = data.problem, other.problem
        d = sum(abs(math.log2(a[k]) - math.log2(b[k])) for k in a if isinstance(a[k], int) and k in b)
        return d + sum(2.0 for k in a if not isinstance(a[k], int) and a[k] != b.get(k))

    same = sources(data, others)
    return min(same, key=lambda o: (distance(o), o.name)) if same else None


# -- Willemsen et al. (2024) score ------------------------------------------------------------


def _random_index(draws: np.ndarray, n: int) -> np.ndarray:
    """Expected position, in values sorted worst first, of the best of ``draws`` random picks
    without replacement among ``n`` values: ``round(M (N + 1) / (M + 1))``."""
    return np.minimum(n - 1, np.round(draws * (n + 1) / (draws + 1)).astype(int))


def score_setup(data: dataset.Dataset, cutoff: float, cutoff_start: float) -> dict[str, Any]:
    """The time range and the random-search baseline of one dataset."""
    ok = data.ok_rows()
    worst_first = np.sort(np.array([r.latency_ms for r in ok]))[::-1]
    n = len(worst_first)
    optimum, median = float(worst_first[-1]), float(np.median(worst_first))
    costs = np.array([(r.compile_s or 0.0) + (r.measure_s or 0.0) for r in data.rows])
    per_trial = float(np.mean(costs)) if costs.any() else 1.0

    def draws_to(quantile: float) -> int:
        target = optimum + (median - optimum) * (1 - quantile)
        i = int(np.argmax(worst_first <= target))
        return max(1, math.ceil(i / (n + 1 - i)))

    start, end = draws_to(cutoff_start) * per_trial, draws_to(cutoff) * per_trial
    times = np.linspace(start, max(end, start + per_trial), 200)
    draws = np.maximum(1, np.round(times / per_trial))
    baseline = worst_first[_random_index(draws, n)]
    return {"times": times, "baseline": baseline, "optimum": optimum, "worst": float(worst_first[0]),
            "end_trials": draws_to(cutoff)}


def willemsen_score(run: Run, setup: dict[str, Any]) -> float:
    """Mean over the time range of ``(random - found) / (random - optimum)`` for one run; the
    best found so far is held after the run's last trial."""
    clock = np.cumsum(run.cost_s)
    found = np.array([x if x is not None else np.inf for x in run.latency_ms])
    best = np.minimum.accumulate(found) if len(found) else found
    idx = np.searchsorted(clock, setup["times"], side="right") - 1
    at = np.where(idx >= 0, best[np.clip(idx, 0, None)] if len(best) else np.inf, np.inf)
    at = np.minimum(at, setup["worst"])
    base, opt = setup["baseline"], setup["optimum"]
    denom = np.where(base - opt > 0, base - opt, np.nan)
    return float(np.nanmean((base - at) / denom))


# -- report ----------------------------------------------------------------------------------


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    finite = sorted(values)
    q = statistics.quantiles(finite, n=4, method="inclusive") if len(finite) > 1 else [finite[0]] * 3
    return q[0], statistics.median(finite), q[2]


def _fmt(value: float, cap: int) -> str:
    return f">{cap}" if math.isinf(value) else f"{value:g}"


def trials_to_targets(runs: Sequence[Run], outcome: Outcome) -> dict[str, Any]:
    """Per target (``t97``, ``t99``): quartiles of the trials the runs needed, with their cap, and
    the median's share of the dataset (``t97_share``)."""
    cap = max(len(r.tflops) for r in runs)
    row: dict[str, Any] = {}
    for target in TARGETS:
        lo, med, hi = _quartiles([r.trials_to(target, outcome.best_tflops) for r in runs])
        row[f"t{round(target * 100)}"] = (lo, med, hi, cap)
        row[f"t{round(target * 100)}_share"] = med / outcome.size
    return row


def target_cells(row: dict[str, Any], target: str) -> list[str]:
    """Table cells of one target of a :func:`trials_to_targets` row: median [q1-q3], share."""
    lo, med, hi, cap = row[target]
    return [f"{_fmt(med, cap)} [{_fmt(lo, cap)}-{_fmt(hi, cap)}]",
            "-" if math.isinf(med) else f"{100 * row[target + '_share']:.1f}%"]


def summary_rows(outcome: Outcome) -> list[dict[str, Any]]:
    rows = []
    for name, runs in outcome.runs.items():
        row: dict[str, Any] = {"strategy": name, "runs": len(runs), **trials_to_targets(runs, outcome)}
        scores = outcome.scores.get(name, [])
        row["score"] = (statistics.mean(scores), statistics.pstdev(scores)) if scores else (math.nan, math.nan)
        row["overhead_ms"] = 1e3 * sum(r.overhead_s for r in runs) / max(1, sum(len(r.tflops) for r in runs))
        row["transfer"] = runs[0].transfer
        rows.append(row)
    return rows


def markdown(outcomes: Sequence[Outcome], synthetic: bool, args: argparse.Namespace) -> str:
    lines = []
    if synthetic:
        lines += ["**SYNTHETIC datasets: made-up latencies for developing the benchmark, not measurements.**", ""]
    lines += [
        f"Seeds per strategy: {args.seeds}; proposals per batch: {args.batch}; Willemsen score over the time "
        f"range where random search reaches the {args.cutoff_start:g} to {args.cutoff:g} quantile "
        "(0 = random search, 1 = optimum; mean ± std over seeds).", "",
    ]
    for outcome in outcomes:
        lines += [f"### {outcome.dataset} ({outcome.size} configurations, best {outcome.best_tflops:.1f} TFLOP/s)", ""]
        lines += ["| strategy | trials to 97% (median [q1-q3]) | % of size | trials to 99% | % of size | "
                  "score | strategy ms/trial |", "|---|---|---|---|---|---|---|"]
        for row in summary_rows(outcome):
            cells = [row["strategy"] + (f" (from {row['transfer']})" if row["transfer"] else "")]
            cells += target_cells(row, "t97") + target_cells(row, "t99")
            mean, std = row["score"]
            cells += [f"{mean:.3f} ± {std:.3f}", f"{row['overhead_ms']:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if any(o.by_source for o in outcomes):
        lines += ["### xgb+transfer from each other dataset", "",
                  "The table above transfers from the nearest shape only; here, from every other one.", "",
                  "| dataset | transfer from | trials to 97% (median [q1-q3]) | % of size | trials to 99% |",
                  "|---|---|---|---|---|"]
        for outcome in outcomes:
            for name, runs in outcome.by_source.items():
                row = trials_to_targets(runs, outcome)
                cells = target_cells(row, "t97") + target_cells(row, "t99")[:1]
                lines.append(f"| {outcome.dataset} | {name} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += checks(outcomes)
    return "\n".join(lines) + "\n"


# the acceptance targets: trials to 97% of the best, median over seeds
XGB_SHARE, TRANSFER_SHARE, RANDOM_RATIO = 0.03, 0.02, 3.0


def targets(outcomes: Sequence[Outcome]) -> dict[str, dict[str, tuple[bool, str]]]:
    """Per dataset, each acceptance target that its strategies allow checking: whether it is met,
    and the figures behind it."""
    found: dict[str, dict[str, tuple[bool, str]]] = {}
    for outcome in outcomes:
        med = {r["strategy"]: r["t97"][1] for r in summary_rows(outcome)}
        size, got = outcome.size, {}
        if "xgb" in med:
            got[f"xgb within {XGB_SHARE:.0%} of size"] = (
                med["xgb"] <= XGB_SHARE * size, f"{med['xgb']:g} <= {XGB_SHARE * size:g}")
            if "random" in med:
                got[f">={RANDOM_RATIO:g}x fewer than random"] = (
                    RANDOM_RATIO * med["xgb"] <= med["random"], f"{med['xgb']:g} vs {med['random']:g}")
            if "tpe" in med:
                got["fewer than tpe"] = (med["xgb"] < med["tpe"], f"{med['xgb']:g} vs {med['tpe']:g}")
        if "xgb+transfer" in med:
            got[f"xgb+transfer within {TRANSFER_SHARE:.0%} of size"] = (
                med["xgb+transfer"] <= TRANSFER_SHARE * size, f"{med['xgb+transfer']:g} <= {TRANSFER_SHARE * size:g}")
        found[outcome.dataset] = got
    return found


def checks(outcomes: Sequence[Outcome]) -> list[str]:
    """The issue's acceptance targets, checked on each dataset."""
    lines = ["### Targets", ""]
    for name, got in targets(outcomes).items():
        lines.append(f"- {name}: " + "; ".join(f"{goal}: {ok} ({why})" for goal, (ok, why) in got.items()))
    return lines


def plot(outcome: Outcome, path: Path, synthetic: bool) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2) if len(outcome.runs) <= 10 else (8, 5.5))
    for i, (name, runs) in enumerate(outcome.runs.items()):
        length = min(max(len(r.tflops) for r in runs), outcome.size)
        curves = []
        for r in runs:
            c = r.best_so_far(outcome.best_tflops)[:length]
            curves.append(np.pad(c, (0, length - len(c)), mode="edge") if len(c) else np.zeros(length))
        curves = np.array(curves)
        x = np.arange(1, length + 1)
        # the colour cycle has 10 colours: more strategies than that also differ in line style
        ax.plot(x, 100 * np.median(curves, axis=0), label=name, ls=("-", "--", ":")[i // 10 % 3])
        ax.fill_between(x, 100 * np.percentile(curves, 25, axis=0), 100 * np.percentile(curves, 75, axis=0), alpha=0.2)
    for target in TARGETS:
        ax.axhline(100 * target, color="grey", lw=0.6, ls="--")
    ax.set_xscale("log")
    ax.set_ylim(50, 100.5)
    ax.set_xlabel("trials (configurations measured)")
    ax.set_ylabel("best so far, % of the dataset's best TFLOP/s")
    title = f"{outcome.dataset}: median over seeds, band = quartiles"
    ax.set_title(("SYNTHETIC " if synthetic else "") + title, fontsize=9)
    ax.legend(fontsize=8 if len(outcome.runs) <= 10 else 6, loc="lower right", ncol=1 if len(outcome.runs) <= 10 else 2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def benchmark(datasets: Sequence[dataset.Dataset], args: argparse.Namespace,
              log: Callable[[str], None] = print, run: Callable[..., Run] | None = None) -> list[Outcome]:
    """Every strategy of ``args.strategies`` on every dataset, one run per seed. ``run`` (default
    :func:`run_one`, same arguments) runs one; ``experiments/field_benchmark.py`` passes one that
    also knows other tuners' strategies."""
    run = run or run_one
    outcomes = []
    for data in datasets:
        best = data.best().tflops
        outcome = Outcome(data.name, len(data), best)
        setup = score_setup(data, args.cutoff, args.cutoff_start)
        horizon = max(args.min_horizon, math.ceil(args.horizon * len(data)))
        cap = max(horizon, math.ceil(args.max_share * len(data)))
        source = nearest(data, datasets)
        hints = None
        if any("carver" in name for name in args.strategies):
            op = registry.load(data.op)
            hints = op.hints(op.problem(**data.problem), _space(data), Target.from_dict(data.meta["target"]),
                             kind="carver", n=8)
        for name in args.strategies:
            if "transfer" in name and source is None:
                log(f"{data.name}: no other dataset of {data.op} on this GPU to transfer from; skipping {name}")
                continue
            start = time.perf_counter()
            runs = [run(data, name, seed, horizon=horizon, cap=cap, batch=args.batch, hints=hints,
                        transfer=source.path if "transfer" in name and source else "")
                    for seed in range(args.seeds)]
            outcome.runs[name] = runs
            outcome.scores[name] = [willemsen_score(r, setup) for r in runs]
            log(f"{data.name} {name}: {len(runs)} runs in {time.perf_counter() - start:.1f} s")
        if args.transfer_from == "all":
            for other in sources(data, datasets):
                if other is source and "xgb+transfer" in outcome.runs:
                    outcome.by_source[other.name] = outcome.runs["xgb+transfer"]
                    continue
                start = time.perf_counter()
                outcome.by_source[other.name] = [
                    run_one(data, "xgb+transfer", seed, horizon=horizon, cap=cap, batch=args.batch, transfer=other.path)
                    for seed in range(args.seeds)]
                log(f"{data.name} xgb+transfer from {other.name}: {args.seeds} runs in "
                    f"{time.perf_counter() - start:.1f} s")
        outcomes.append(outcome)
    return outcomes


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
    parser.add_argument("--batch", type=int, default=1, help="proposals per round (the tuner's pipeline depth)")
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
    text = markdown(outcomes, args.synthetic, args)
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

