"""The strategy benchmark's table (markdown) and convergence plots."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilesearch.experiment.replay_runs import TARGETS, Outcome
from tilesearch.experiment.scores import checks, summary_rows, trials_to_targets


def _fmt(value: float, cap: int) -> str:
    return f">{cap}" if math.isinf(value) else f"{value:g}"


def target_cells(row: dict[str, Any], target: str) -> list[str]:
    """Table cells of one target of a :func:`trials_to_targets` row: median [q1-q3], share."""
    lo, med, hi, cap = row[target]
    return [f"{_fmt(med, cap)} [{_fmt(lo, cap)}-{_fmt(hi, cap)}]",
            "-" if math.isinf(med) else f"{100 * row[target + '_share']:.1f}%"]


def markdown(outcomes: Sequence[Outcome], synthetic: bool, args: argparse.Namespace,
             datasets: Sequence[Any] | None = None) -> str:
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
    lines += checks(outcomes, datasets)
    return "\n".join(lines) + "\n"


# the acceptance targets: trials to 97% of the best, median over seeds


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
