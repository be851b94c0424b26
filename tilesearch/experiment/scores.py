"""What the strategy benchmark reads off its runs: trials to a target, the score of Willemsen et
al. (2024) against random search, and whether issue 3's targets are met."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilesearch import dataset
from tilesearch.experiment.replay_runs import TARGETS, Outcome, Run


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


# Issue 19 on the datasets of whole spaces: median trials to 97% of the best known, at most 40 on a
# GEMM sample of the full space (15 with transfer), and 3% of the size where every valid
# configuration was recorded (einsum-sum)
FULL_XGB, FULL_TRANSFER, FULL_SWEEP_SHARE = 40, 15, 0.03


def full_space(data: Any) -> bool:
    """Whether a dataset covers an op's whole space: a sample of it (format version 2), or every
    valid configuration of an op other than GEMM (whose sweeps cover the 7-knob sub-space)."""
    return bool(data.sampled) or data.op != "gemm"


def full_space_targets(pairs: Sequence[tuple[Any, Outcome]]) -> dict[str, dict[str, tuple[bool, str]]]:
    """Per full-space dataset (``(dataset, outcome)`` pairs; others are left out), issue 19's
    targets that its strategies allow checking: whether each is met, and the figures behind it."""
    found: dict[str, dict[str, tuple[bool, str]]] = {}
    for data, outcome in pairs:
        if not full_space(data):
            continue
        med = {r["strategy"]: r["t97"][1] for r in summary_rows(outcome)}
        limits = ({"xgb": FULL_SWEEP_SHARE * outcome.size} if not data.sampled
                  else {"xgb": FULL_XGB, "xgb+transfer": FULL_TRANSFER})
        found[outcome.dataset] = {f"{name} within {limit:g}": (med[name] <= limit, f"{med[name]:g} <= {limit:g}")
                                  for name, limit in limits.items() if name in med}
    return found


def checks(outcomes: Sequence[Outcome], datasets: Sequence[Any] | None = None) -> list[str]:
    """The acceptance targets checked on each dataset: issue 19's on a dataset of a whole space
    (known when ``datasets``, in the order of ``outcomes``, are given), issue 3's on the others."""
    whole = full_space_targets(list(zip(datasets, outcomes))) if datasets is not None else {}
    lines = ["### Targets", ""]
    for name, got in targets(outcomes).items():
        got = whole.get(name, got)
        lines.append(f"- {name}: " + "; ".join(f"{goal}: {ok} ({why})" for goal, (ok, why) in got.items()))
    return lines
