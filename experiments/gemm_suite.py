"""The GEMM suite of issue 7 (GPU): tilesearch's tuned GEMM against ``torch.matmul``, per shape,
with an ablation of each knob beyond the tile shape.

For every shape the full GEMM space is tuned (``--strategy``, default ``xgb``, which also learns
from the shapes tuned before it in the same storage; ``--trials`` per shape, every shape within an
even share of ``--budget-s``); each trial's ``torch.matmul`` is
timed interleaved with the kernel in the same worker on the same inputs (the runner's
baseline), so the ratio of a shape is its best trial's own ``baseline_ms / latency_ms``.

Ablation, two ways, per knob group (``split_k``; ``persistent``; ``epilogue``; ``tma`` with
``warp_specialize``; and all of them together, i.e. the template as it was before):

- ``flip``: the search's best configuration with the group reset to its old value, measured in
  the same study right after the search (a flip the space prunes as the same kernel as another
  configuration is that configuration; gain 1 where that is the best itself); gain = flip
  latency / that best's latency.
- ``records``: the best trial (search or flips) whose group is at its old value; gain = its
  latency / the best trial's latency.

Above 1 the knob helps; ``-`` where nothing without it was measured. The tuned figures are the
best trial overall (a flip can beat the search's best).

Everything goes to one SQLite storage under ``--out``; ``gemm_suite.json`` and ``gemm_suite.log``
too. The table is printed last.

``--retime`` tunes nothing: for every shape with a study in ``--out``'s storage it re-times the
``--top`` fastest configurations found and ``torch.matmul`` with tilesearch's final re-time
(:func:`tilesearch.runner.retime.final_retime`: a fresh runner worker, each kernel checked against
float64, all timed interleaved in the same rounds until each ratio's 95% interval is within +-1%).
The suite's figures are that run's ratios with their intervals (``retime.json``), so that every
ratio comes from one run and one clock, and a search's best is not flattered by having been picked
as the luckiest of its trials.

usage: python experiments/gemm_suite.py --out $OUT [--shapes all|NAME,...] [--trials 24] [--budget-s 420]
       python experiments/gemm_suite.py --out $OUT --retime [--top 3]
"""

import argparse
import json
import math
import os
import re
import sys
import time
from pathlib import Path

import tilesearch
from search_spaces.gemm import DEFAULTS
from tilesearch import registry
from tilesearch.builder import Builder, LocalBuilder
from tilesearch.runner import LocalRunner, Runner
from tilesearch.space import config_key
from tilesearch.strategy import Proposal, Strategy, create
from tilesearch.strategy.enumerated import candidate_key
from tilesearch.strategy.until import Until

SHAPES = {  # name: (m, n, k, dtype, layout)
    "sq4096": (4096, 4096, 4096, "float16", "nn"),
    "sq8192": (8192, 8192, 8192, "float16", "nn"),
    "sq12288": (12288, 12288, 12288, "float16", "nn"),
    "sq8192_bf16": (8192, 8192, 8192, "bfloat16", "nn"),
    "sq4096_nt": (4096, 4096, 4096, "float16", "nt"),
    "longk": (1024, 1024, 14336, "float16", "nn"),
    "wide": (4096, 2048, 1024, "float16", "nn"),
    "skinny1": (1, 8192, 8192, "float16", "nn"),
    "skinny16": (16, 8192, 8192, "float16", "nn"),
    "skinny64": (64, 8192, 8192, "bfloat16", "nn"),
    "skinny128": (128, 8192, 8192, "float16", "nn"),
    "odd1000": (1000, 3000, 500, "float16", "nn"),
    "odd4097": (4097, 4095, 129, "bfloat16", "nn"),
}
SAME_KERNEL = re.compile(r"same kernel as (\w+)=(\w+)")
FLIP_RESERVE_S = 20.0  # of a shape's share of the budget: compiles in flight at its deadline, then the flips
GROUPS = {
    "split_k": {"split_k": 1},
    "persistent": {"persistent": False},
    "epilogue": {"epilogue": "direct"},
    "tma_ws": {"tma": True, "warp_specialize": "on"},
}


def log(*parts):
    print(*parts, flush=True)


class SharedBuilder(Builder):
    """The suite's builder pool, lent to each tune() call (which closes what it is given)."""

    def __init__(self, inner):
        self.inner, self.workers = inner, inner.workers

    def submit(self, candidate):
        return self.inner.submit(candidate)

    def close(self):
        pass


class SharedRunner(Runner):
    """The suite's GPU worker, lent to each tune() call: started once, closed by the suite."""

    def __init__(self, inner):
        self.inner, self.target = inner, None

    def start(self):
        self.target = self.target or self.inner.start()
        return self.target

    def run(self, candidate):
        return self.inner.run(candidate)

    @property
    def versions(self):
        return self.inner.versions


class Listed(Strategy):
    """Proposes exactly ``configs`` (those not measured yet), then nothing."""

    name = "listed"

    def __init__(self, configs):
        self.configs = configs

    def propose(self, context, n):
        taken = context.taken()
        return [Proposal(c) for c in self.configs if candidate_key(context, c) not in taken][:n]


def canonical(config, space):
    """``config``, or where the space prunes it as "same kernel as KNOB=VALUE", that configuration
    (as often as the space says so): with no aligned rows, ``tma=True`` and ``warp_specialize=on``
    compile the kernel of ``tma=False`` and ``off``."""
    for _ in range(len(config)):
        same = SAME_KERNEL.search(space.why_invalid(config) or "")
        if not same:
            break
        knob, value = same.groups()
        config = {**config, knob: {"True": True, "False": False}.get(value, value)}
    return config


def flips(best, space):
    """Per group: the best configuration with the group at its old value (in its canonical form,
    so that resetting every new knob of a best with unaligned rows still measures the plain
    epilogue), and how to get it (``same``: it is the best itself; ``same kernel``: the space
    prunes it as compiling the best's kernel; ``measure``; ``invalid``)."""
    out = {}
    for group, old in {**GROUPS, "all_new": DEFAULTS}.items():
        flipped = {**best, **{k: v for k, v in old.items() if k in best}}
        config = canonical(flipped, space)
        reason = space.why_invalid(config)
        if config == best:
            out[group] = ("same" if flipped == best else "same kernel", config, space.why_invalid(flipped))
        elif reason:
            out[group] = ("invalid", config, reason)
        else:
            out[group] = ("measure", config, space.why_invalid(flipped))
    return out


def without(records, old, space):
    """The records whose configuration already has the group's old values, up to the space's
    "same kernel" equivalences."""
    return [r for r in records if canonical({**r.config, **old}, space) == r.config]


def run_shape(name, args, builder, runner, shape_deadline):
    """Searches one shape, measures the flips of its best, and returns its row."""
    m, n, k, dtype, layout = SHAPES[name]
    op = registry.load("gemm")
    problem = op.problem(m=m, n=n, k=k, dtype=dtype, layout=layout)
    study = f"suite:{name}"
    common = dict(storage=args.storage, study=study, builder=builder, runner=runner, progress=False)
    start = time.perf_counter()
    search = Until(create(args.strategy, args.seed), lambda _: time.monotonic() > shape_deadline)
    result = tilesearch.tune("gemm", problem, strategy=search, trials=args.trials, **common)
    row = {"shape": name, "m": m, "n": n, "k": k, "dtype": dtype, "layout": layout, "study": study,
           "statuses": result.statuses, "search_s": round(time.perf_counter() - start, 1)}
    if not result.best:
        row["error"] = "no correct configuration"
        return row
    best = result.best[0]
    space = op.space(problem, runner.start())
    plan = flips(best.config, space)
    to_measure = [cfg for how, cfg, _ in plan.values() if how == "measure"]
    if to_measure:
        db = tilesearch.TuningDatabase(args.storage, result.study)
        tilesearch.tune("gemm", problem, strategy=Listed(to_measure), trials=db.evaluated() + len(to_measure),
                        **common)
    db = tilesearch.TuningDatabase(args.storage, result.study)
    ok = [r for r in db.finished().values() if r.status == "ok" and r.latency_ms]
    by_key = {config_key(r.config): r for r in ok}
    top = min(ok, key=lambda r: r.latency_ms)  # a flip may beat the search's best
    flops = op.flops(problem)
    row.update(
        trials=len(db.finished()), measured=sum(1 for r in db.finished().values() if r.status != "invalid"),
        best_config=top.config, tflops=top.tflops, torch_tflops=flops / (top.baseline_ms * 1e-3) / 1e12,
        ratio=top.speedup, latency_ms=top.latency_ms, baseline_ms=top.baseline_ms, rel_err=top.rel_err,
        wall_s=round(time.perf_counter() - start, 1),
    )
    ablation = {}
    for group, (how, cfg, reason) in plan.items():
        entry = {"flip": how, "flip_config": cfg, "flip_reason": reason}
        if how in ("same", "same kernel"):
            entry["flip_gain"] = 1.0
        else:
            rec = by_key.get(config_key(cfg))
            entry["flip_gain"] = rec.latency_ms / best.latency_ms if rec else None
            entry["flip_status"] = rec.status if rec else "not measured"
        rest = without(ok, DEFAULTS if group == "all_new" else GROUPS[group], space)
        entry["records_without"] = len(rest)
        entry["records_gain"] = min(r.latency_ms for r in rest) / top.latency_ms if rest else None
        ablation[group] = entry
    row["ablation"] = ablation
    return row


def summary(ratios):
    """The suite's verdict line: geometric mean of tuned over torch, shapes below 0.9, the lowest."""
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    return (f"geometric mean tuned/torch over {len(ratios)} shapes: {geo:.3f}; "
            f"shapes below 0.9: {sum(x < 0.9 for x in ratios)}; min {min(ratios):.3f}")


def table(rows):
    def f(x, spec=".2f"):
        return "-" if x is None else format(x, spec)

    groups = [*GROUPS, "all_new"]
    head = ["shape", "m x n x k", "dtype", "lay", "trials", "tuned TF/s", "torch TF/s", "ratio", "best knobs"]
    head += [f"{g} flip/rec" for g in groups]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    ratios = []
    for r in rows:
        if "ratio" not in r:
            lines.append(f"{r['shape']} | {r.get('m')}x{r.get('n')}x{r.get('k')} | {r.get('dtype', '')} | "
                         f"{r.get('layout', '')} | - | - | - | - | {r.get('error', 'not run')}")
            continue
        ratios.append(r["ratio"])
        c = r["best_config"]
        knobs = (f"{c['block_m']}x{c['block_n']}x{c['block_k']} s{c['num_stages']} t{c['threads']} "
                 f"p{c['panel_size']} {c['warp_policy']} sk{c.get('split_k', 1)} "
                 f"{'pers ' if c.get('persistent') else ''}{c.get('epilogue', 'direct')} "
                 f"{'tma' if c.get('tma', True) else 'cpasync'}/{c.get('warp_specialize', 'on')}")
        cells = [r["shape"], f"{r['m']}x{r['n']}x{r['k']}", r["dtype"], r["layout"], str(r["measured"]),
                 f(r["tflops"], ".1f"), f(r["torch_tflops"], ".1f"), f(r["ratio"], ".3f"), knobs]
        for g in groups:
            a = r["ablation"][g]
            cells.append(f"{f(a['flip_gain'])}/{f(a['records_gain'])}")
        lines.append(" | ".join(cells))
    if ratios:
        lines.append(summary(ratios))
    return "\n".join(lines)


def retime(args, names):
    """Re-times the ``args.top`` fastest configurations of each of ``names`` tuned in the storage
    beside ``torch.matmul`` with :func:`tilesearch.runner.retime.final_retime` (one fresh runner
    worker per shape, all kernels and the baseline in the same rounds); returns rows {shape,
    kernels: [{config, ms, rel_err, error}], torch_ms, ratio, ratio_low, ratio_high, ties}."""
    import optuna

    from tilesearch.records import Candidate
    from tilesearch.runner import LocalRunner
    from tilesearch.runner.retime import final_retime

    op = registry.load("gemm")
    tuned = set(optuna.get_all_study_names(args.storage))
    picks = {}
    for name in (n for n in names if f"suite:{n}" in tuned):
        db = tilesearch.TuningDatabase(args.storage, f"suite:{name}")
        ok = sorted((r for r in db.finished().values() if r.status == "ok" and r.latency_ms),
                    key=lambda r: r.latency_ms)
        if ok:
            picks[name] = [(r.number, r.config) for r in ok[: args.top]]
    m_n_k = {name: dict(zip(("m", "n", "k", "dtype", "layout"), SHAPES[name])) for name in picks}
    runner = LocalRunner(timeout=300)
    target = runner.start()
    try:
        with LocalBuilder(args.workers or None, timeout=300) as pool:  # fills TileLang's cache in parallel
            builds = [pool.submit(Candidate("gemm", m_n_k[name], c, target)) for name in picks for _, c in picks[name]]
            failed = [b.result().error for b in builds if not b.result().ok]
        if failed:
            log(f"retime: {len(failed)} configurations did not compile; first: {failed[0][:300]}")
        rows = []
        for name, trials in picks.items():
            problem = op.problem(**m_n_k[name])
            final = final_retime(runner, trials, op="gemm", problem=problem.to_dict(), target=target)
            kernels = [{"config": e.config, "rel_err": e.result.rel_err, "max_err": e.result.max_err,
                        "error": e.result.error, **({"ms": e.result.latency_ms} if e.result.latency_ms else {})}
                       for e in final.entries]
            best = final.chosen.result if final.chosen else None
            row = {"shape": name, **m_n_k[name], "kernels": kernels,
                   "torch_ms": best.baseline_ms if best else None, "ratio": best.speedup if best else None,
                   "ratio_low": best.speedup_low if best else None, "ratio_high": best.speedup_high if best else None,
                   "ties": list(final.ties),
                   "tflops": op.flops(problem) / (best.latency_ms * 1e-3) / 1e12 if best else None,
                   "torch_tflops": op.flops(problem) / (best.baseline_ms * 1e-3) / 1e12 if best else None}
            rows.append(row)
            log(json.dumps({k: row[k] for k in ("shape", "torch_ms", "ratio", "ratio_low", "ratio_high")}
                           | {"ms": [round(e.get("ms", math.nan), 5) for e in kernels]}))
    finally:
        runner.close()
    return rows


def retime_table(rows):
    lines = ["shape | m x n x k | dtype | lay | tuned TF/s | torch TF/s | ratio [95% interval] | best knobs "
             "(of the top re-timed)",
             "--- | --- | --- | --- | --- | --- | --- | ---"]
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    for r in rows:
        fastest = min((e for e in r["kernels"] if "ms" in e), key=lambda e: e["ms"], default=None)
        c = fastest["config"] if fastest else {}
        knobs = " ".join(f"{k}={v}" for k, v in c.items() if DEFAULTS.get(k, None) != v)
        lines.append(f"{r['shape']} | {r['m']}x{r['n']}x{r['k']} | {r['dtype']} | {r['layout']} | "
                     f"{r['tflops'] or 0:.1f} | {r['torch_tflops'] or 0:.1f} | {r['ratio'] or 0:.3f} "
                     f"[{r.get('ratio_low') or 0:.3f}, {r.get('ratio_high') or 0:.3f}] | {knobs}")
    if ratios:
        lines.append(summary(ratios))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--shapes", default="all", help="all, or comma-separated names: " + ",".join(SHAPES))
    p.add_argument("--trials", type=int, default=24, help="search trials per shape (flips come on top)")
    p.add_argument("--strategy", default="xgb")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=420.0, help="wall time for all shapes (searches and flips)")
    p.add_argument("--workers", type=int, default=0, help="compile processes (0: all cores but one)")
    p.add_argument("--run-timeout", type=float, default=20.0, help="seconds one check-and-time may take (a hang)")
    p.add_argument("--retime", action="store_true", help="tune nothing: re-time the studies in --out together")
    p.add_argument("--top", type=int, default=3, help="--retime: configurations re-timed per shape")
    args = p.parse_args(argv)
    names = list(SHAPES) if args.shapes == "all" else args.shapes.split(",")
    unknown = [s for s in names if s not in SHAPES]
    if unknown:
        p.error(f"unknown shapes {unknown}; known: {', '.join(SHAPES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.storage = f"sqlite:///{out / 'gemm_suite.sqlite'}"
    if args.retime:
        start = time.monotonic()
        rows = retime(args, names)
        (out / "retime.json").write_text(json.dumps({"shapes": rows, "top": args.top}, indent=1, default=str))
        log(f"\nGEMM suite re-timed in one process ({time.monotonic() - start:.0f} s): the top {args.top} "
            "configurations of each shape and torch.matmul, interleaved\n" + retime_table(rows))
        return 0
    log_file = open(out / "gemm_suite.log", "a")

    def note(text, full=None):
        log(text)
        log_file.write((full or text) + "\n")
        log_file.flush()

    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    note(f"gemm_suite: {len(names)} shapes, {args.trials} trials each, strategy {args.strategy}, "
         f"budget {args.budget_s:.0f} s")
    pool, gpu = LocalBuilder(args.workers or None, timeout=300), LocalRunner(timeout=args.run_timeout)
    builder, runner = SharedBuilder(pool), SharedRunner(gpu)
    rows = []
    try:
        target = runner.start()
        note(f"GPU: {target.gpu} ({target.arch}, {target.num_sms} SMs); versions {runner.versions}")
        for i, name in enumerate(names):
            left = deadline - time.monotonic()
            if left < 10:
                rows.append({"shape": name, "error": "not run: suite budget spent"})
                note(f"{name}: not run (budget spent)")
                continue
            shape_deadline = time.monotonic() + max(5.0, left / (len(names) - i) - FLIP_RESERVE_S)
            try:
                row = run_shape(name, args, builder, runner, shape_deadline)
            except Exception as e:  # a broken shape is a row, the suite goes on
                row = {"shape": name, "error": f"{type(e).__name__}: {e}"}
            rows.append(row)
            brief = {k: row.get(k) for k in ("shape", "measured", "tflops", "torch_tflops", "ratio", "wall_s", "error")}
            note(json.dumps(brief, default=str), json.dumps(row, default=str))
    finally:
        pool.close()
        gpu.close()
    (out / "gemm_suite.json").write_text(json.dumps(
        {"shapes": rows, "args": {k: v for k, v in vars(args).items()}, "wall_s": time.monotonic() - t0},
        indent=1, default=str))
    text = table(rows)
    note(f"\nGEMM suite ({time.monotonic() - t0:.0f} s): tuned vs torch.matmul, timed interleaved in one worker; "
         "gains = latency without / with, flip (best with the knob reset) / rec (best record without it)\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
