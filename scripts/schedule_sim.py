"""The tuning loop's schedule simulated with recorded compile times (fast-tuning issue): when does the
GPU wait, and what would passing a slow compile (``tuner.PATIENCE``) change? No GPU, no TileLang.

Replays each run of ``trials.jsonl`` (one line per trial: ``db``, ``number``, ``compile_s``, as
``experiments/results/fast/launch_order_h100_2026-12-06`` recorded README's main command on an
H100) through the loop's schedule in steps of 5 ms: 15 compile workers, the blind start's 27 trials
launched at once, then a round of 4 proposals whenever a record leaves 15 or fewer in flight, the
last 6 of 48 trials a polish launched once every search result is in (compiled ahead, so at once).
The runner measures the oldest compiled kernel, ``measure`` s each; the tuning process spends
``record`` s per record, ``launch`` s per launch and ``propose`` s per round, one thing at a time.
The costs are round figures of the H100 runs (48 trials measured in about 10 s; the database phase
3-6 s over about 100 records and launches). Prints the loop's end, the first result and the runner's
busy share after it: results recorded in launch order; with each patience (the oldest trial passed
once it has compiled that long by the lower bound the loop uses, the earliest compile start among the
younger trials done); and with the first patience only while the runner has nothing to measure.

usage: python scripts/schedule_sim.py TRIALS.jsonl [patience=3,1] [measure=0.21] [record=0.06] [launch=0.05]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

WORKERS, ROUND, BLIND, BUDGET, POLISH, WARM_S, STEP = 15, 4, 27, 48, 6, 3.5, 0.005
DEPTH = WORKERS + ROUND  # trials in flight (tuner._Loop.depth for a strategy that learns)


def recorded_compiles(path: str) -> dict[str, list[float]]:
    """Each run of ``TRIALS.jsonl`` (its ``db``): its trials' compile seconds in launch order."""
    runs: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for line in open(path):
        row = json.loads(line)
        runs[row["db"]].append((row["number"], row["compile_s"]))
    return {db: [s for _, s in sorted(rows)] for db, rows in sorted(runs.items())}


def simulate(compile_s: list[float], patience: float | None, measure: float, record: float, launch: float,
             propose: float, idle: bool = False) -> tuple[float, float, float]:
    """(loop end, first result, busy share after it) of one run; ``patience=None`` keeps launch order."""
    compile_s = list(compile_s)
    free = [WARM_S] * WORKERS  # when each compile worker is next free (the pool warms up first)
    built: list[float] = []
    recorded: set[int] = set()
    measured: set[int] = set()
    done_at: dict[int, float] = {}

    def submit(k: int, now: float) -> float:
        for _ in range(k):
            if len(built) >= BUDGET:
                break
            now += launch
            w = min(range(WORKERS), key=free.__getitem__)
            free[w] = max(now, free[w]) + compile_s[len(built)]
            built.append(free[w])
        return now

    search = BUDGET - POLISH
    now = thread_free = submit(min(BLIND, search), propose)
    current, ends, first, busy, polishing = None, 0.0, None, 0.0, False
    while len(recorded) < BUDGET and now < 300:
        if current is not None and now >= ends:
            measured.add(current)
            done_at[current] = now
            current = None
        if current is None:
            ready = [i for i in range(len(built)) if i not in measured and built[i] <= now]
            if ready:
                current, ends = min(ready), now + measure
                first = now if first is None else first
        busy += STEP if current is not None and first is not None else 0.0
        if now >= thread_free:
            flight = [i for i in range(len(built)) if i not in recorded]
            take = None
            if flight and flight[0] in measured:
                take = flight[0]
            elif flight and patience is not None and built[flight[0]] > now:  # the oldest still compiling
                # the oldest trial has compiled at least as long as any younger one that has started
                # (the pool starts them in launch order): from the earliest start among those done
                done = [i for i in flight if i in measured]
                started = min((built[i] - compile_s[i] for i in done), default=now)
                if done and now - started >= patience and (current is None or not idle):
                    take = done[0]
            if take is not None:
                recorded.add(take)
                thread_free = now + record
                flight.remove(take)
                if len(built) < search and len(flight) <= DEPTH - ROUND:
                    thread_free = submit(min(DEPTH - len(flight), search - len(built)), thread_free + propose)
                elif len(built) >= search and not flight and not polishing:
                    polishing = True
                    compile_s[len(built):] = [0.01] * (BUDGET - len(built))
                    thread_free = submit(BUDGET - len(built), thread_free + propose)
        now += STEP
    first = first or 0.0
    return now, first, busy / (now - first)


def main(argv: list[str]) -> None:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    runs = {db: times for path in argv if "=" not in path for db, times in recorded_compiles(path).items()}
    patiences = [float(p) for p in opts.get("patience", "3,1").split(",")]
    costs = dict(measure=float(opts.get("measure", 0.21)), record=float(opts.get("record", 0.06)),
                 launch=float(opts.get("launch", 0.05)), propose=float(opts.get("propose", 0.10)))
    print(f"loop end s / first result s / runner busy after it; {costs}")
    for db, times in sorted(runs.items()):
        times = times[:BUDGET]
        cells = []
        for patience, idle in [(None, False), *((p, False) for p in patiences), (patiences[0], True)]:
            end, first, busy = simulate(times, patience, idle=idle, **costs)
            label = "launch order" if patience is None else f"patience {patience:g}{' idle' if idle else ''}"
            cells.append(f"{label}: {end:5.1f} {first:4.1f} {100 * busy:3.0f}%")
        print(f"{db.rsplit('/', 1)[-1]:18s} " + " | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
