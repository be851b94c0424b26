"""Did the refits win where a range probed? (the deploy issue, ``experiments/probe_refits.py``)

A probe of a shape range times every tuned size's winners at a size between them, and since
``676af37`` also the op's refits of the configuration serving that size
(:data:`~tilesearch.range_tuner.REFITTED_ATTR`). This reads range storages, finished or cut short,
and compares at each probed size the fastest refit with the fastest of the rest, by the figures the
range's table compares (:func:`~tilesearch.records.comparable_ms`: each trial at the clock of its
size's baseline). Nothing is timed here: it reads what the probes measured.
"""

from __future__ import annotations

import json
import lzma
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna

from tilesearch.buckets import RESOLVED
from tilesearch.database import RESERVED, TuningDatabase, open_storage, studies
from tilesearch.range_tuner import PREFIX, REFITTED_ATTR
from tilesearch.records import fastest_first
from tilesearch.space import config_key


def short(config: dict[str, Any]) -> str:
    """A GEMM configuration's tile as people read it: ``swapped 16x64x128 split-K 2``."""
    tile = f"{config.get('block_m')}x{config.get('block_n')}x{config.get('block_k')}"
    words = ["swapped"] * bool(config.get("swap_ab")) + [tile]
    words += [f"split-K {config['split_k']}"] * (config.get("split_k", 1) > 1)
    words += ["persistent"] * bool(config.get("persistent"))
    return " ".join(words)


def compare(storage: str) -> list[dict[str, Any]]:
    """One row per probed size of each range in ``storage`` (an Optuna storage URL)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    opened = open_storage(storage, read_only=True)  # reads: writes nothing to a storage it is given
    summaries = studies(opened)
    by_problem = {s.user_attrs.get("problem"): s.study_name for s in summaries
                  if RESERVED not in s.study_name and "problem" in s.user_attrs}
    rows = []
    for summary in summaries:
        if not summary.study_name.startswith(PREFIX) or REFITTED_ATTR not in summary.user_attrs:
            continue
        key = summary.study_name[len(PREFIX):].split(":")[1]  # m=1..16384,n=4096,... (record_name)
        name = next(part.split("=")[0] for part in key.split(",") if ".." in part)  # the ranged parameter
        for size, refits in summary.user_attrs[REFITTED_ATTR]:
            problem = ",".join(f"{name}={size}" if part.startswith(f"{name}=") else part for part in key.split(","))
            if problem not in by_problem:
                continue
            records = TuningDatabase(storage, by_problem[problem], read_only=True).best(10**6)
            figures = fastest_first(records)
            mine = {config_key(c) for c in refits}
            refit = next(((ms, r) for ms, r in figures if config_key(r.config) in mine), None)
            other = next(((ms, r) for ms, r in figures if config_key(r.config) not in mine), None)
            if refit is None or other is None:
                continue  # a probe cut short
            rows.append({"range": key, "size": size, "measured": len(figures),
                         "winners_ms": other[0], "winner": short(other[1].config),
                         "refit_ms": refit[0], "refit": short(refit[1].config),
                         "gain": other[0] / refit[0] - 1})
    return rows


def _url(path: str, scratch: Path) -> str:
    """An SQLite URL for ``path``, unpacked into ``scratch`` if it is ``.xz``."""
    if path.endswith(".xz"):
        plain = scratch / f"{len(list(scratch.iterdir()))}.db"
        with lzma.open(path) as packed, open(plain, "wb") as out:
            shutil.copyfileobj(packed, out)
        path = str(plain)
    return f"sqlite:///{path}"


def report(options: SimpleNamespace) -> int:
    paths = [p for p in str(options.storages).split(",") if p]
    missing = [p for p in paths if not Path(p).is_file()]
    if not paths or missing:
        print(f"probe_refits: {'no such file: ' + missing[0] if missing else 'no storages'}; "
              "give storages=A.db.xz,B.db (range storages, e.g. those scripts/range_call.sh returns)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="tilesearch-refits-") as scratch:
        for path in paths:
            for row in compare(_url(path, Path(scratch))):
                rows.append({"storage": "/".join(Path(path).parts[-2:]), **row})
    out = Path(options.out)
    (out / "probe_refits.json").write_text(json.dumps(rows, indent=1))
    lines = [f"{'storage':<28} {'size':>6} {'n':>3} {'winners best':>13} {'refit best':>11}   gain  refit"]
    for r in rows:
        lines.append(f"{r['storage']:<28} {r['size']:>6} {r['measured']:>3} {r['winners_ms'] * 1e3:>10.1f} us"
                     f" {r['refit_ms'] * 1e3:>8.1f} us {r['gain']:+6.1%}  {r['refit']} (winners: {r['winner']})")
    won = [r["gain"] for r in rows if r["gain"] > RESOLVED]
    lines.append(f"refits fastest by more than {RESOLVED:.0%} (what one search figure resolves) at {len(won)} of "
                 f"{len(rows)} probed sizes" + (f", by a median {statistics.median(won):.1%} and at most "
                                                f"{max(won):.1%}" if won else ""))
    (out / "probe_refits.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
