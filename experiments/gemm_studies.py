"""Two published GEMM studies, redone with tilesearch on one GPU (float16, ``torch.matmul`` timed
interleaved beside every kernel by the runner).

- ``swizzle``: a TileLang user's rasterization study. M=N=K from 12288 to 20480 in steps of 1024,
  block 128x128x32, 3 stages, 128 threads, swizzle off / panel 10 / panel 20; then the same sizes
  with every knob tuned (``--tuned-sizes``, default all; ``--trials``).
- ``pipelining``: tilus's tutorial workloads 4096x4096x4096 and 1024x1024x14336, num_stages 1 to 5
  at fixed tiles (128x128x64, 128 threads, panel 8, square), then fully tuned.

Every configuration is a trial in one SQLite study per problem under ``$OUT``; the tables and PNG
plots go to ``$OUT`` too.

usage: python experiments/gemm_studies.py --out $OUT [--studies swizzle,pipelining] [--trials 16]
"""

import argparse
import json
import os
from pathlib import Path

import tilesearch
from tilesearch.space import Categorical, Space

SWIZZLE_SIZES = list(range(12288, 20480 + 1, 1024))
BASE = dict(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=0, warp_policy="square")


def fixed_space(**values):
    """A space of the GEMM knobs with each knob pinned, except those given as tuples."""
    knobs = {**BASE, **values}
    return Space([Categorical(k, v if isinstance(v, tuple) else (v,)) for k, v in knobs.items()])


def run(shape, space, trials, storage, strategy="grid", study=None):
    m, n, k = shape
    result = tilesearch.tune("gemm", m=m, n=n, k=k, dtype="float16", space=space, strategy=strategy, trials=trials,
                             storage=storage, study=study, progress=False)
    return result


def rows_of(result):
    db = tilesearch.TuningDatabase(result.storage, result.study)
    return [r for r in db.records() if r.duplicate_of is None and r.status == "ok"]


def swizzle(args, out):
    table = []
    for size in SWIZZLE_SIZES:
        shape = (size, size, size)
        fixed = run(shape, fixed_space(panel_size=(0, 10, 20)), 3, args.storage, study=f"swizzle-fixed-{size}")
        by_panel = {r.config["panel_size"]: r for r in rows_of(fixed)}
        row = {"size": size, **{f"panel_{p}": by_panel[p].tflops for p in by_panel},
               "torch": by_panel[0].tflops / by_panel[0].speedup}
        if size in args.tuned_sizes:
            tuned = run(shape, None, args.trials, args.storage, strategy=args.strategy)
            best = tuned.best[0]
            row.update(tuned=best.tflops, tuned_vs_torch=best.speedup, tuned_config=best.config)
        table.append(row)
        print(json.dumps(row, default=str), flush=True)
    return table


def pipelining(args, out):
    table = []
    for shape in [(4096, 4096, 4096), (1024, 1024, 14336)]:
        fixed = run(shape, fixed_space(block_k=64, panel_size=8, num_stages=(1, 2, 3, 4, 5)), 5, args.storage,
                    study=f"pipelining-fixed-{shape}")
        rows = sorted(rows_of(fixed), key=lambda r: r.config["num_stages"])
        tuned = run(shape, None, args.trials, args.storage, strategy=args.strategy)
        best = tuned.best[0]
        row = {"shape": "x".join(map(str, shape)),
               **{f"stages_{r.config['num_stages']}": r.tflops for r in rows},
               "torch": rows[0].tflops / rows[0].speedup, "tuned": best.tflops, "tuned_vs_torch": best.speedup,
               "tuned_config": best.config}
        table.append(row)
        print(json.dumps(row, default=str), flush=True)
    return table


def plot(name, table, out):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2 if name == "swizzle" else 1, figsize=(12 if name == "swizzle" else 7, 4),
                             squeeze=False)
    ax = axes[0][0]
    if name == "swizzle":
        x = [r["size"] for r in table]
        for key, label in [("panel_0", "swizzle off"), ("panel_10", "panel 10"), ("panel_20", "panel 20"),
                           ("torch", "torch.matmul (beside the fixed tiles)")]:
            ax.plot(x, [r.get(key) for r in table], marker="o", label=label)
        tuned = [(r["size"], r["tuned"], r["tuned_vs_torch"]) for r in table if "tuned" in r]
        if tuned:
            ax.plot([t[0] for t in tuned], [t[1] for t in tuned], marker="*", linestyle="none", markersize=12,
                    label="tilesearch tuned")
            ratio = axes[0][1]
            ratio.plot([t[0] for t in tuned], [t[2] for t in tuned], marker="*", markersize=12, color="tab:purple")
            ratio.axhline(1.0, linestyle="--", color="tab:red", linewidth=1)
            ratio.set_xlabel("M = N = K")
            ratio.set_ylabel("tuned / torch.matmul, timed interleaved")
            ratio.grid(alpha=0.3)
        ax.set_xlabel("M = N = K")
    else:
        for r in table:
            stages = sorted(int(k.split("_")[1]) for k in r if k.startswith("stages_"))
            ax.plot(stages, [r[f"stages_{s}"] for s in stages], marker="o", label=f"{r['shape']} fixed tiles")
            ax.axhline(r["torch"], linestyle="--", linewidth=1, color=ax.lines[-1].get_color())
            ax.axhline(r["tuned"], linestyle=":", linewidth=1.5, color=ax.lines[-1].get_color())
        ax.set_xlabel("num_stages (dashed: torch.matmul, dotted: tilesearch tuned)")
    ax.set_ylabel("TFLOP/s")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=120)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--studies", default="swizzle,pipelining")
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--strategy", default="xgb")
    p.add_argument("--tuned-sizes", default="all", help="swizzle sizes also tuned: all, or comma-separated")
    args = p.parse_args()
    sizes = SWIZZLE_SIZES if args.tuned_sizes == "all" else [s for s in args.tuned_sizes.split(",") if s]
    args.tuned_sizes = {int(s) for s in sizes}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.storage = f"sqlite:///{out / 'studies.sqlite'}"
    results = {}
    for name in args.studies.split(","):
        results[name] = {"swizzle": swizzle, "pipelining": pipelining}[name](args, out)
        plot(name, results[name], out)
    (out / "gemm_studies.json").write_text(json.dumps(results, indent=1, default=str))
    for name, table in results.items():
        print(f"\n{name} (TFLOP/s; float16; torch.matmul timed in the same worker)")
        for r in table:
            print("  " + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
                                   if k != "tuned_config"))


if __name__ == "__main__":
    main()
