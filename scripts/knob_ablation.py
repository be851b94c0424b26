"""What one knob is worth on kernels a search chose: each recorded choice with the knob at each of
its values, re-timed together beside ``torch.matmul``.

The issue of kernels at the limit asks for an ablation of every new knob. A knob's worth is not
its best value on a grid but what it changes on the kernels the search actually picks, so this
takes the chosen configuration of each problem in recorded experiment JSON files (``tilesearch``
experiments: model shapes, trust, the suite), and makes its variants: ``knob`` at every value the
op's space offers for that problem (or at ``values``, for a knob the space does not search), crossed with the values of ``also`` (a knob the first one
depends on, e.g. ``raster`` with ``panel_size``), keeping those the space's constraints allow.
They are compiled in the compile pool, then checked against float64 and timed in the final
re-time's way (all variants and the baseline interleaved in the same rounds, L2 flushed, fresh
worker processes pooled, 95% intervals), one problem after another. ``only`` keeps the problems
whose key contains one of its ``|``-separated parts.

Writes ``knob_ablation.json`` under ``out`` and prints, per problem, every variant's ratio to
``torch.matmul``, the recorded choice marked ``*``, and last one line per problem: the choice, the
best variant and their difference.

usage: python scripts/knob_ablation.py out=$OUT knob=raster [values=row,column] [also=panel_size] from=a.json[,b.json] ['only=m=16,|m=128,'] [budget_s=400] [run_timeout=120]
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def chosen(paths: list[str], only: str | None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(problem, configuration) of each search's final choice in the experiment files, once each."""
    seen, out = set(), []
    for path in paths:
        for prob in json.loads(Path(path).read_text())["problems"]:
            if only and not any(part in prob["key"] for part in only.split("|")):
                continue
            for search in prob["searches"]:
                config = (search.get("final") or {}).get("config") or search.get("best_config")
                key = json.dumps([prob["problem"], config], sort_keys=True)
                if config and key not in seen:
                    seen.add(key)
                    out.append((prob["problem"], config))
    return out


def variants(space: Any, config: dict[str, Any], knobs: list[str]) -> list[dict[str, Any]]:
    """``config`` with ``knobs`` at each combination of the values ``space`` offers, valid ones only;
    the configuration itself first."""
    full = dict(config)
    axes = [space[k].values() for k in knobs]
    out = [full]
    for values in itertools.product(*axes):
        c = {**full, **dict(zip(knobs, values))}
        if c not in out and space.why_invalid(c) is None:
            out.append(c)
    return out


def with_values(space: Any, knob: str, values: list[Any]) -> Any:
    """``space`` with ``knob`` taking ``values`` (its constraints kept); a knob the space leaves
    out while it is not searched (GEMM's ``cluster``) is added."""
    from tilesearch.space import Categorical, Space

    knobs = [Categorical(knob, tuple(values)) if k.name == knob else k for k in space.knobs]
    if knob not in space.names:
        knobs.append(Categorical(knob, tuple(values)))
    return Space(knobs, space.constraints)


def _parse(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    return int(text) if text.lstrip("-").isdigit() else text


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    missing = [k for k in ("knob", "from") if k not in opts]
    if missing:
        print(f"knob_ablation: {', '.join(missing)} missing; {__doc__.strip().splitlines()[-1]}", file=sys.stderr)
        return 2
    out = Path(opts.get("out") or os.environ.get("OUT") or "ablation-out")
    out.mkdir(parents=True, exist_ok=True)
    knobs = [opts["knob"], *([opts["also"]] if "also" in opts else [])]
    from tilesearch import registry
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Candidate, Status
    from tilesearch.runner.local import LocalRunner

    op = registry.load("gemm")
    runner = LocalRunner(timeout=float(opts.get("run_timeout", 120)))  # a variant that hangs costs this
    target = runner.start()
    todo = []
    for problem, config in chosen(opts["from"].split(","), opts.get("only")):
        problem = op.problem(**problem)
        space = op.space(problem, target)
        config = {**op.defaults, **config}
        if "values" in opts:  # values the space does not search (e.g. raster=column)
            values = [_parse(v) for v in opts["values"].split(",")]
            space = with_values(space, opts["knob"], values)
            config.setdefault(opts["knob"], values[0])  # a knob left out of the space: its first value is its default
        found = variants(space, config, knobs)
        if len(found) > 1:  # else the space offers the knob no other value here
            todo.append((problem, config, [Candidate("gemm", dict(problem), c, target) for c in found]))
            print(f"{problem}: {len(found)} variants", flush=True)
    began = time.time()
    with LocalBuilder(workers=int(opts.get("workers", 15)), timeout=600) as builder:
        futures = [[builder.submit(c) for c in cands] for _, _, cands in todo]
        built = [[c for c, f in zip(cands, fs) if f.result().ok] for (_, _, cands), fs in zip(todo, futures)]
    print(f"compiled in {time.time() - began:.0f} s", flush=True)
    report = []
    budget = float(opts.get("budget_s", "inf"))
    for (problem, config, _), cands in zip(todo, built):
        if time.time() - began > budget:
            print(f"budget_s={budget:g} spent: {problem} and the rest left out", flush=True)
            break
        results = runner.retime(cands)
        rows = [{"config": c.config, "chosen": c.config == config, "status": r.status.value, "speedup": r.speedup,
                 "low": r.speedup_low, "high": r.speedup_high, "ms": r.latency_ms, "torch_ms": r.baseline_ms,
                 "rel_err": r.rel_err, "sm_clock_mhz": r.sm_clock_mhz, "error": (r.error or "")[:300] or None}
                for c, r in zip(cands, results)]
        report.append({"problem": dict(problem), "knobs": knobs, "rows": rows})
        (out / "knob_ablation.json").write_text(json.dumps(report, indent=1, default=str))
        print(f"== {problem}", flush=True)
        for row in rows:
            label = " ".join(f"{k}={row['config'][k]}" for k in knobs)
            if row["status"] != Status.OK.value:
                print(f"  {label:32s} {row['status']}: {row['error']}", flush=True)
            else:
                print(f"  {label:32s} {row['speedup']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
                      f"{' *' if row['chosen'] else ''}", flush=True)
    runner.close()
    print(f"\nproblem | chosen ({' '.join(knobs)}) | best variant | best - chosen")
    for entry in report:
        ok = [r for r in entry["rows"] if r["speedup"]]
        mine = next((r for r in ok if r["chosen"]), None)
        if not ok or mine is None:
            print(f"{entry['problem']} | no timed choice")
            continue
        best = max(ok, key=lambda r: r["speedup"])
        p = entry["problem"]

        def label(r: dict[str, Any]) -> str:
            return " ".join(str(r["config"][k]) for k in knobs) + f" {r['speedup']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"

        apart = "overlap" if best["low"] <= mine["high"] else "apart"
        print(f"{p['m']}x{p['n']}x{p['k']} {p['dtype']} {p['layout']} | {label(mine)} | {label(best)} | "
              f"{best['speedup'] - mine['speedup']:+.3f} ({apart})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
