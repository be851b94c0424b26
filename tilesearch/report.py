"""Plain-text tables of tuning records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilesearch.database import TrialRecord
from tilesearch.records import Final, Status


def _fmt(value: object, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    cells = [list(map(str, header))] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def interval(low: float | None, high: float | None) -> str:
    """``[low, high]``, or ``-`` for a figure without an interval."""
    return "-" if low is None or high is None else f"[{low:.4g}, {high:.4g}]"


def best_table(records: Sequence[TrialRecord]) -> str:
    """Rank, speed, ratio to the baseline with its 95% interval, error and knobs of each record;
    a raced record's runs are marked ``r`` and a line under the table says what that means."""
    knobs = list(records[0].config) if records else []
    header = ["#", "trial", "latency_ms", "tflops", "vs_baseline", "95% interval", "runs", "rel_err", *knobs]
    rows = [
        [i + 1, r.number, r.latency_ms, r.tflops, r.speedup, interval(r.speedup_low, r.speedup_high),
         f"{r.runs}r" if r.attrs.get("raced") else r.runs, r.rel_err, *(r.config.get(k) for k in knobs)]
        for i, r in enumerate(records)
    ]
    raced = [str(r.number) for r in records if r.attrs.get("raced")]
    note = (f"\nr: raced (trials {', '.join(raced)}): timed until clearly slower than the best so far, "
            "not to +-1%" if raced else "")
    return table(rows, header) + note


def _configurations(n: int) -> str:
    return f"{n} configuration" + ("" if n == 1 else "s")


def final_table(final: Final) -> str:
    """The final re-time: how it was taken, the tie set, and each configuration's figures with
    their intervals and the clock and power records."""
    if final.replayed and not final.together:
        how = "[replayed] the recorded figures served again (a dataset holds no interval unless it recorded one)"
    elif final.together:
        processes = max((e.result.extra.get("processes", 1) for e in final.entries), default=1)
        where = "one fresh worker process" if processes == 1 else f"each of {processes} fresh worker processes, pooled"
        how = f"{_configurations(len(final.entries))} and the baseline timed interleaved in {where}"
    else:
        how = f"{_configurations(len(final.entries))} timed again one at a time"
    chosen = final.chosen
    lines = [f"final re-time: {how}"]
    if chosen is not None:
        ties = ", ".join(str(t) for t in final.ties)
        rule = {"speedup": "ratio intervals overlap", "latency": "latency intervals overlap",
                "none": "no intervals: only the best"}[final.basis]
        lines.append(f"chosen: trial {chosen.trial}; tie set ({rule}): trials {ties}; "
                     "within a tie set the fastest median is chosen, then the lowest trial number")
    rows = []
    for e in final.entries:
        r = e.result
        ok = r.status == Status.OK
        rows.append([e.trial, r.status.value if not ok else ("chosen" if e is chosen else "tie" if e.trial in final.ties
                                                            else ""),
                     r.latency_ms, interval(r.latency_q1, r.latency_q3), r.runs, r.speedup,
                     interval(r.speedup_low, r.speedup_high), r.sm_clock_mhz, r.power_w, r.temp_c])
    header = ["trial", "", "latency_ms", "quartiles", "runs", "vs_baseline", "95% interval", "sm_mhz", "power_w",
              "temp_c"]
    lines.append(table(rows, header))
    return "\n".join(lines)


def status_line(statuses: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())) or "none"


def revalidation(out: Any) -> str:
    """A :class:`~tilesearch.revalidate.Revalidation`: what differs, old against new for each
    configuration re-measured, whether the winner changed, and the verdict."""
    tag = " [replayed]" if out.replayed else ""
    lines = [f"old study: {out.old_study}", f"current study: {out.study}{tag}"]
    lines += [f"differs: {d}" for d in out.differences] or ["differs: nothing (same identity)"]
    fig = "vs_baseline" if out.basis == "speedup" else "latency_ms"
    rows = []
    for r in out.rows:
        new = r.new
        old_fig = r.old_speedup if out.basis == "speedup" else r.old_latency_ms
        new_fig = new.speedup if out.basis == "speedup" else new.latency_ms
        low, high = (new.speedup_low, new.speedup_high) if out.basis == "speedup" else (new.latency_low, new.latency_high)
        rows.append([r.trial if r.trial >= 0 else "-", r.source, r.old_latency_ms, new.latency_ms, old_fig, new_fig,
                     interval(low, high), new.status.value if new.status != Status.OK else ""])
    lines.append(table(rows, ["trial", "from", "old_ms", "new_ms", f"old_{fig}", f"new_{fig}", "95% interval", ""]))
    lost = out.old_winner_lost
    lines.append(f"old winner: {fig} {out.old_figure:.4g} then, "
                 + (f"{out.old_winner_now:.4g} now ({100 * -lost:+.1f}%; noise +-{100 * out.noise:.1f}%)"
                    if lost is not None else "no longer measures correctly"))
    lines.append("winner: " + ("changed" if out.winner_changed else "unchanged (or tied)"))
    lines.append(f"searched further: {out.searched} trials" if out.searched else
                 "searched further: no" + ("" if out.winner_changed or (lost or 0) > out.noise
                                           else " (winner unchanged within the noise)"))
    best = f"{out.best_now:.4g}" if out.best_now is not None else "none"
    lines.append(f"verdict: {'REGRESSED' if out.regressed else 'ok'}: best {fig} now {best} against "
                 f"{out.old_figure:.4g} before (noise +-{100 * out.noise:.1f}%)")
    return "\n".join(lines)
