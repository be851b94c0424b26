"""Search against the field: tilesearch's strategies, Optuna's samplers and Kernel Tuner's
strategies on the same replay datasets, with the same budgets, seeds and metrics.

The replay benchmark of :mod:`tilesearch.experiment.strategies` (whose runs, metrics, tables
and plots this reuses) with the field in it; ``experiments/field_benchmark.py`` declares what it
compares and calls :func:`main`. Each strategy runs once per seed on each dataset of ``--data``:

- ours (``random``, ``tpe``, ``xgb``, ``xgb+transfer``) through tilesearch's tuning loop with
  the replay runner;
- Optuna's ``cmaes`` (CmaEsSampler) and ``gp`` (GPSampler) in a plain ask-and-tell loop on the
  dataset (:func:`optuna_run`), as an Optuna user would run them: a configuration a constraint
  rejects is told as pruned and costs no trial (as tilesearch records it), a repeat is told
  its known latency and costs no trial, a failed one is told as failed and costs one. After
  ``MAX_IDLE_PROPOSALS`` asks in a row that measure nothing new, one untried configuration of
  the dataset is drawn at random and measured, as tilesearch's loop falls back for TPE: on a
  sample of a large space (1 configuration in 700 of the full GEMM space's grid) CMA-ES
  otherwise ended its asks having measured 18. ``gp`` measures, for each ask, the untried
  configuration of the dataset nearest to the proposal (:func:`nearest_untried`), told to the
  study as a trial of its own, the proposal itself as pruned: each ask then measures one
  configuration, as a Bayesian optimizer over a finite set of valid configurations does. Asked
  and told like CMA-ES, GPSampler learned nothing from a rejected or repeated proposal, proposed
  it again, and fitted its model again for each ask: more than 7 s of CPU per trial on the
  2-core machine (one 40-trial run did not finish in 14 minutes). It is still not in the default
  list, for its fitting time; ``--strategies ...,gp`` runs it;
- Kernel Tuner's (``kt:NAME``, see :data:`tilesearch.experiment.kernel_tuner.STRATEGIES`) in Kernel Tuner's own
  simulation mode on the dataset exported to its cache format (:mod:`tilesearch.experiment.kernel_tuner`);
  ``kt:NAME/reversed`` lists every knob's values in reverse order in the export (differential
  evolution's first population follows that order: see :mod:`tilesearch.experiment.kernel_tuner`).

Every run gets the same budget (``--max-share`` of the dataset, Kernel Tuner's ``max_fevals``);
tuner-driven runs of ours stop early once they are past ``--horizon`` and have 99% of the best,
which changes none of the metrics. A Kernel Tuner strategy may end before the budget by its own
rules (dual annealing counts revisits in SciPy's ``maxfun``; the genetic algorithm and firefly
stop after their generations); the table says how many configurations each used. Metrics:
trials to 97% and 99% of the dataset's best (median and quartiles over seeds), the Willemsen
score on the recorded compile and measure times plus each tuner's own time.

Writes ``results.md`` (per dataset: every strategy; then one table of median trials to 97% and
scores across datasets, and per dataset which strategy needed the fewest trials), ``results.json``
and ``convergence_<dataset>.png`` to ``--out``; prints the summary last.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilesearch import dataset
from tilesearch.experiment import benchmark_report as br
from tilesearch.experiment import kernel_tuner as kts
from tilesearch.experiment import peer_runs
from tilesearch.experiment import replay_runs as rr
from tilesearch.experiment import scores as sc
from tilesearch.experiment import strategies as sb
from tilesearch.space import config_key
from tilesearch.tuner import MAX_IDLE_PROPOSALS

OURS = ("random", "tpe", "xgb", "xgb+transfer")
OPTUNA = ("cmaes", "gp")
# differential evolution again on the knob values listed in reverse (see kernel_tuner_sim's "Order")
DEFAULT = OURS + ("cmaes",) + tuple(kts.PREFIX + name for name in kts.STRATEGIES) + ("kt:diff_evo/reversed",)


def peer(name: str) -> bool:
    """Whether ``name`` is another tuner's strategy (Optuna's samplers but TPE, Kernel Tuner's):
    its runs may be recorded (:mod:`tilesearch.experiment.peer_runs`)."""
    return name in OPTUNA or name.startswith(kts.PREFIX)


def tuner(name: str) -> str:
    if name.startswith(kts.PREFIX):
        return "Kernel Tuner"
    return "Optuna" if name in OPTUNA or name == "tpe" else "tilesearch"


def optuna_run(data: dataset.Dataset, name: str, seed: int, *, horizon: int, cap: int) -> rr.Run:
    """Optuna's sampler ``name`` (``rr.OPTUNA_SAMPLERS``) on ``data`` in an ask-and-tell loop
    (see the module docstring), until ``horizon`` trials and 99% of the best, or ``cap``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = rr.dataset_space(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # with_margin is marked experimental
        sampler = rr.OPTUNA_SAMPLERS[name](seed).sampler()
    study = optuna.create_study(sampler=sampler, direction="minimize")
    distributions = space.distributions()
    best, goal = math.inf, data.best().latency_ms / max(rr.TARGETS)
    seen: dict[str, dataset.Row] = {}
    overhead = 0.0
    fallback = random.Random(seed).sample(data.rows, len(data.rows))
    idle = 0
    for _ in range(50 * cap):  # asks, repeats and pruned ones included
        if len(seen) >= cap or (len(seen) >= horizon and best <= goal):
            break
        if idle >= MAX_IDLE_PROPOSALS:  # as tilesearch's loop does for TPE: one untried configuration at random
            untried = next((r for r in fallback if config_key(r.config) not in seen), None)
            if untried is not None:
                study.enqueue_trial(space.to_params(untried.config))
            idle = 0
        start = time.perf_counter()
        trial = study.ask(distributions)
        overhead += time.perf_counter() - start
        config = space.from_params(trial.params)
        if name in SNAPPED:
            row = nearest_untried(space, config, fallback, seen)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)  # the proposal; its nearest is measured
            if row is None:
                break
            seen[config_key(row.config)] = row
            ok = row.ok and row.latency_ms is not None
            best = min(best, row.latency_ms) if ok else best
            study.add_trial(optuna.trial.create_trial(
                params=space.to_params(row.config), distributions=distributions, value=row.latency_ms if ok else None,
                state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL))
            continue
        if space.why_invalid(config) is not None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            idle += 1
            continue
        key = config_key(config)
        idle = idle + 1 if key in seen else 0
        row = seen.get(key) or data.get(config)
        seen.setdefault(key, row)
        if row is not None and row.ok:
            best = min(best, row.latency_ms)
            study.tell(trial, row.latency_ms)
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return rr._run(name, seed, list(seen.values()), overhead)


SNAPPED = ("gp",)  # Optuna's samplers whose proposals are measured at the nearest untried configuration


def nearest_untried(space: Any, config: dict[str, Any], rows: Sequence[dataset.Row], seen: dict[str, Any]) -> Any:
    """The first of ``rows`` (a seeded order: it breaks ties) not in ``seen`` nearest to
    ``config``: a knob whose values are all numbers adds the distance of their ranks, over the
    whole span (1 from the first value to the last), any other knob 1 where the values differ.
    None when every row was tried."""
    ranks = {}
    for knob in space.knobs:
        values = knob.values()
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        ranks[knob.name] = ({v: i / max(1, len(values) - 1) for i, v in enumerate(sorted(values))} if numbers else None)

    def distance(other: dict[str, Any]) -> float:
        total = 0.0
        for name, rank in ranks.items():
            a, b = config.get(name), other.get(name)
            if rank is not None and a in rank and b in rank:
                total += abs(rank[a] - rank[b])
            elif a != b:
                total += 1.0
        return total

    untried = (r for r in rows if config_key(r.config) not in seen)
    return min(untried, key=lambda r: distance(r.config), default=None)


class Runs:
    """Runs one strategy on one dataset and seed: Kernel Tuner's in its simulation mode (each
    dataset exported once), the others through :func:`strategy_benchmark.run_one`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.caches: dict[str, kts.Cache] = {}
        # (dataset, strategy) -> the error of a Kernel Tuner run that raised: such a run counts as
        # measuring nothing, and the report says why (greedy_ils raised on a sparse sample of a
        # space, where a configuration may have no neighbour). The runs carry it (``Run.error``);
        # here it stops the later seeds of this process from trying again.
        self.failed: dict[tuple[str, str], str] = {}

    def __call__(self, data: dataset.Dataset, name: str, seed: int, *, horizon: int, cap: int, batch: int,
                 transfer: str = "", hints: list | None = None) -> rr.Run:
        if name in OPTUNA:
            return optuna_run(data, name, seed, horizon=horizon, cap=cap)
        if not name.startswith(kts.PREFIX):
            return rr.run_one(data, name, seed, horizon=horizon, cap=cap, batch=batch, transfer=transfer, hints=hints)
        reverse = name.endswith(kts.REVERSED)
        strategy = name.removeprefix(kts.PREFIX).removesuffix(kts.REVERSED)
        key = data.name + ("_reversed" if reverse else "")
        if key not in self.caches:
            self.caches[key] = kts.export(data, self.directory / f"{key}.json", reverse=reverse)
        if (data.name, name) in self.failed:  # once it raised (a time limit may take minutes), not again
            return rr._run(name, seed, [], 0.0, error=self.failed[(data.name, name)])
        try:
            rows, seconds = kts.run(self.caches[key], strategy, seed, max_fevals=cap)
        except Exception as exc:  # noqa: BLE001 - another tuner's failure is a result, not ours to stop on
            self.failed[(data.name, name)] = f"{type(exc).__name__}: {exc} (seed {seed})"
            return rr._run(name, seed, [], 0.0, error=self.failed[(data.name, name)])
        return rr._run(name, seed, rows, seconds)


def compare(datasets: Sequence[dataset.Dataset], args: argparse.Namespace, run: Runs,
            record: peer_runs.Record | None = None, log: Any = print) -> list[rr.Outcome]:
    """The benchmark of ``args.strategies`` on ``datasets``: the peers' runs that ``record`` has
    in full for this budget and these seeds served from it, every other strategy run by ``run``."""
    served = [s for s in args.strategies if record is not None and peer(s)
              and peer_runs.complete(record, datasets, s, args)]
    live = argparse.Namespace(**{**vars(args), "strategies": [s for s in args.strategies if s not in served]})
    outcomes = sb.benchmark(datasets, live, log=log, run=run)
    if record is not None:
        peer_runs.serve(outcomes, datasets, record, served, args)
        if served:
            log(f"served from {record.path}: {', '.join(served)}")
    return outcomes


def raised(outcomes: Sequence[rr.Outcome]) -> dict[tuple[str, str], str]:
    """(dataset, strategy) -> the error of its first run that raised."""
    found: dict[tuple[str, str], str] = {}
    for o in outcomes:
        for name, runs in o.runs.items():
            error = next((r.error for r in runs if r.error), "")
            if error:
                found[(o.dataset, name)] = error
    return found


def medians(outcome: rr.Outcome) -> dict[str, float]:
    return {row["strategy"]: row["t97"][1] for row in sc.summary_rows(outcome)}


def verdicts(outcomes: Sequence[rr.Outcome]) -> dict[str, dict[str, Any]]:
    """Per dataset: the strategies with the fewest median trials to 97% and the highest mean
    score, and whether ``xgb`` (without transfer) is among each, against every other strategy
    but its own transfer variant."""
    found = {}
    for outcome in outcomes:
        rows = [r for r in sc.summary_rows(outcome) if r["strategy"] != "xgb+transfer"]
        fewest = min(r["t97"][1] for r in rows)
        top = max(r["score"][0] for r in rows)
        found[outcome.dataset] = {
            "fewest_t97": [r["strategy"] for r in rows if r["t97"][1] == fewest], "t97": fewest,
            "best_score": [r["strategy"] for r in rows if r["score"][0] == top], "score": top,
            "xgb_fewest": any(r["strategy"] == "xgb" and r["t97"][1] == fewest for r in rows),
            "xgb_best_score": any(r["strategy"] == "xgb" and r["score"][0] == top for r in rows),
        }
    return found


def summary(outcomes: Sequence[rr.Outcome], args: argparse.Namespace) -> str:
    """One table across datasets (median trials to 97%, mean score), then the verdicts."""
    names = list(dict.fromkeys(n for o in outcomes for n in o.runs))
    lines = ["| strategy | tuner | " + " | ".join(f"{o.dataset} t97 | score" for o in outcomes) + " |",
             "|---|---|" + "---|---|" * len(outcomes)]
    for name in names:
        cells = [name, tuner(name)]
        for outcome in outcomes:
            row = next((r for r in sc.summary_rows(outcome) if r["strategy"] == name), None)
            if row is None:
                cells += ["-", "-"]
                continue
            lo, med, hi, cap = row["t97"]
            cells += [f"{br._fmt(med, cap)} [{br._fmt(lo, cap)}-{br._fmt(hi, cap)}]",
                      f"{row['score'][0]:.2f} ± {row['score'][1]:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"t97: trials to 97% of the best, median [q1-q3] over {args.seeds} seeds (>N: not reached "
              "within the budget); score: Willemsen et al.'s, mean ± std over seeds.", ""]
    for name, v in verdicts(outcomes).items():
        lines.append(f"- {name}: fewest trials to 97%: {', '.join(v['fewest_t97'])} ({v['t97']:g}); highest score: "
                     f"{', '.join(v['best_score'])} ({v['score']:.3f}); xgb fewest: {v['xgb_fewest']}, "
                     f"xgb highest score: {v['xgb_best_score']}")
    return "\n".join(lines) + "\n"


def used(outcome: rr.Outcome) -> list[str]:
    """How many configurations each strategy's runs measured (median), against the budget."""
    return [f"- {name}: median {statistics.median(len(r.tflops) for r in runs):g} configurations per run"
            for name, runs in outcome.runs.items() if name.startswith(kts.PREFIX)]


def build_parser(strategies: Sequence[str] = DEFAULT) -> argparse.ArgumentParser:
    parser = sb.build_parser(strategies)
    parser.description = __doc__.split("\n\n")[0]
    parser.set_defaults(out="experiments/results/field")
    parser.add_argument("--caches", default="",
                        help="keep the Kernel Tuner cache files here (default: a temporary directory)")
    parser.add_argument("--datasets", default="*.jsonl*", help="which files of --data (a glob)")
    parser.add_argument("--peers", default="",
                        help="take the other tuners' runs from this record where it has them all "
                             "(tilesearch.experiment.peer_runs), and run only the rest")
    parser.add_argument("--record-peers", default="",
                        help="write the other tuners' runs of this benchmark to this record (kept: what it holds else)")
    return parser


def main(argv: list[str] | None = None, *, strategies: Sequence[str] = DEFAULT) -> int:
    """Runs the field benchmark (``strategies``: the default list to compare); the exit code."""
    args = build_parser(strategies).parse_args(argv)
    args.strategies = [s for s in args.strategies.split(",") if s]
    unknown = [s for s in args.strategies if s.startswith(kts.PREFIX) and s.removeprefix(kts.PREFIX)
               .removesuffix(kts.REVERSED) not in kts.STRATEGIES]
    if unknown:
        print(f"unknown Kernel Tuner strategies {unknown}; choose from {', '.join(kts.STRATEGIES)}", file=sys.stderr)
        return 2
    datasets = [d for d in dataset.load_dir(args.data, args.datasets) if d.meta.get("gpu") != "synthetic"]
    if not datasets:
        print(f"no datasets {args.datasets} in {args.data}; record some with experiments/record_dataset.py",
              file=sys.stderr)
        return 2
    record = peer_runs.Record.load(args.peers) if args.peers else None
    if record is not None and (reasons := record.stale(datasets)):
        print(f"{args.peers} does not fit: {reasons[0]}; record it again with --record-peers {args.peers}",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        runs = Runs(Path(args.caches) if args.caches else Path(tmp))
        outcomes = compare(datasets, args, runs, record, log=lambda text: print(text, file=sys.stderr))
    if args.record_peers:
        keep = peer_runs.Record.load(args.record_peers)
        command = " ".join(["python", "experiments/field_benchmark.py", *(argv if argv is not None else sys.argv[1:])])
        by_name = {d.name: d for d in datasets}
        for outcome in outcomes:
            data = by_name[outcome.dataset]
            for name in filter(peer, outcome.runs):
                keep.add(data, name, *sb.budget(data, args), outcome.runs[name], command)
        keep.save()
        print(f"recorded the other tuners' runs in {keep.path}", file=sys.stderr)
    for outcome in outcomes:
        br.plot(outcome, out / f"convergence_{outcome.dataset}.png", False)
    text = summary(outcomes, args)
    detail = br.markdown(outcomes, False, args, datasets)
    budgets = [line for o in outcomes for line in [f"{o.dataset}:"] + used(o)]
    failed = [f"- {name} on {data}: raised {error}; that run and the later seeds' count as measuring nothing"
              for (data, name), error in raised(outcomes).items()]
    (out / "results.md").write_text(f"## Across datasets\n\n{text}\n## Per dataset\n\n{detail}\n"
                                    "## Configurations used by Kernel Tuner's strategies\n\n" + "\n".join(budgets) + "\n"
                                    + ("\n## Runs that raised\n\n" + "\n".join(failed) + "\n" if failed else ""))
    for line in failed:
        print(line, file=sys.stderr)
    raw = {o.dataset: {"size": o.size, "best_tflops": o.best_tflops,
                       "runs": {name: [{"seed": r.seed, "measured": len(r.tflops), "overhead_s": r.overhead_s,
                                        **{f"trials_to_{round(t * 100)}": r.trials_to(t, o.best_tflops)
                                           for t in rr.TARGETS},
                                        "score": o.scores[name][i]} for i, r in enumerate(runs)]
                                for name, runs in o.runs.items()}}
           for o in outcomes}
    raw["verdicts"] = verdicts(outcomes)
    (out / "results.json").write_text(json.dumps(raw, indent=1, default=str))
    print(f"{len(outcomes)} datasets, {len(args.strategies)} strategies, {args.seeds} seeds in "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(text)
    return 0

