"""How fast a recording storage was filled, stretch by stretch: python scripts/recording_rates.py STORAGE.sqlite

Reads the measured trials of every study in an SQLite storage written by
experiments/record_dataset.py (decompress a committed .sqlite.xz first), splits them into
stretches wherever no trial completed for GAP_S seconds (a new GPU call, or a new problem whose
first configurations are compiling), and prints per stretch: configurations measured, their rate
between the first and last completion, the median seconds in the measuring worker, and the raced
and fully timed trials' median timing seconds and rounds.
"""

import datetime as dt
import json
import sqlite3
import statistics
import sys

GAP_S = 30.0


def main(path: str) -> None:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    attrs: dict[int, dict] = {}
    for trial, key, value in db.execute("select trial_id, key, value_json from trial_user_attributes "
                                        "where key in ('phases', 'runs', 'measure_s', 'raced')"):
        attrs.setdefault(trial, {})[key] = json.loads(value)
    done = {t: dt.datetime.fromisoformat(end) for t, end in db.execute(
        "select trial_id, datetime_complete from trials where datetime_complete is not null")}
    measured = sorted((done[t], a) for t, a in attrs.items() if "runs" in a and t in done)
    stretches: list[list[tuple]] = []
    for when, a in measured:
        if not stretches or (when - stretches[-1][-1][0]).total_seconds() > GAP_S:
            stretches.append([])
        stretches[-1].append((when, a))
    print("| stretch (first completion, UTC) | measured | per minute | measure s (median) | raced: timing s, rounds | timed in full: timing s, rounds |")
    print("|---|---|---|---|---|---|")
    for stretch in stretches:
        span = max((stretch[-1][0] - stretch[0][0]).total_seconds(), 1.0)
        raced = [a for _, a in stretch if a.get("raced")]
        full = [a for _, a in stretch if not a.get("raced")]

        def timing(rows: list[dict], phase: str) -> str:
            if not rows:
                return "-"
            return (f"{len(rows)}: {statistics.median(r['phases'].get(phase, 0.0) for r in rows):.3f}, "
                    f"{statistics.median(r['runs'] for r in rows):.0f}")

        print(f"| {stretch[0][0]:%H:%M:%S} | {len(stretch)} | {len(stretch) / span * 60:.0f} | "
              f"{statistics.median(a['measure_s'] for _, a in stretch):.3f} | {timing(raced, 'time (raced)')} | "
              f"{timing(full, 'time')} |")


if __name__ == "__main__":
    main(sys.argv[1])
