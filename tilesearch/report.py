"""Plain-text tables of tuning records."""

from __future__ import annotations

from collections.abc import Sequence

from tilesearch.database import TrialRecord


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


def best_table(records: Sequence[TrialRecord]) -> str:
    """Rank, speed, ratio to the baseline, error and knobs of each record."""
    knobs = list(records[0].config) if records else []
    header = ["#", "trial", "latency_ms", "tflops", "vs_baseline", "rel_err", *knobs]
    rows = [
        [i + 1, r.number, r.latency_ms, r.tflops, r.speedup, r.rel_err, *(r.config.get(k) for k in knobs)]
        for i, r in enumerate(records)
    ]
    return table(rows, header)


def status_line(statuses: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())) or "none"
