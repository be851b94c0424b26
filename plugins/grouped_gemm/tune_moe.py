"""Tune the grouped GEMM of real MoE layers on a GPU and re-time the best beside PyTorch.

For each layer: ``tilesearch.tune`` with the cost-model strategy (``xgb``, ``--trials`` trials,
tokens routed ``skewed``), then, in this same process, the best kernel is checked against the
float64 reference again and timed interleaved (CUDA events, L2 flushed, median) with
``torch._grouped_mm`` (where this torch has it) and a loop of ``torch.matmul`` over the experts,
on the same inputs. Prints one table; writes it and the tuning studies under ``--out``.

Layers (``--layers``, comma-separated):
- ``mixtral_up``: Mixtral-8x7B's expert up-projection: 8 experts, 4096 tokens routed top-2
  (8192 rows), hidden 4096 -> ffn 14336.
- ``mixtral_down``: its down-projection, ffn 14336 -> hidden 4096.
- ``qwen_moe``: a many-small-experts layer like Qwen1.5-MoE-A2.7B's: 60 experts, 4096 tokens
  routed top-4 (16384 rows), hidden 2048 -> 1408.

usage: python plugins/grouped_gemm/tune_moe.py [--out DIR] [--trials 40] [--layers mixtral_up,qwen_moe]
"""

import argparse
import json
import time
from pathlib import Path

LAYERS = {
    "mixtral_up": dict(experts=8, tokens=8192, n=14336, k=4096),
    "mixtral_down": dict(experts=8, tokens=8192, n=4096, k=14336),
    "qwen_moe": dict(experts=60, tokens=16384, n=1408, k=2048),
}


def retime(op, problem, config, target):
    """The tuned kernel and PyTorch's ways, checked and timed together in this process."""
    import torch
    from tilesearch_grouped_gemm.op import grouped_mm_baseline, matmul_loop_baseline

    from tilesearch.runner.measure import MeasureSettings, bench, check

    kernel = op.build(problem, config, target)
    generator = torch.Generator(device="cuda").manual_seed(1)
    inputs = op.make_inputs(problem, torch.device("cuda"), generator)
    outputs = op.make_outputs(problem, torch.device("cuda"))
    rel, _, why = check(kernel, inputs, outputs, op.reference(problem, inputs), op.tolerance(problem, config))
    fns = {"tilesearch": lambda: kernel(*inputs, *outputs)}
    grouped = grouped_mm_baseline(problem, inputs)
    if grouped is not None:
        fns["torch._grouped_mm"] = grouped
    fns["matmul loop"] = matmul_loop_baseline(problem, inputs)
    times = bench(list(fns.values()), MeasureSettings(rep_ms=500.0), target.l2_bytes)
    return dict(zip(fns, times)), rel, why


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="moe-out")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--layers", default="mixtral_up,qwen_moe")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import tilesearch
    from tilesearch import registry

    op = registry.load("grouped_gemm")
    rows = []
    for name in args.layers.split(","):
        params = {**LAYERS[name], "dtype": args.dtype, "routing": "skewed"}
        start = time.perf_counter()
        result = tilesearch.tune("grouped_gemm", dict(params), strategy="xgb", trials=args.trials,
                                 storage=f"sqlite:///{(out / 'moe.db').resolve()}", progress=False)
        tune_s = time.perf_counter() - start
        if not result.best:
            rows.append(dict(layer=name, params=params, tune_s=tune_s, statuses=result.statuses, error="no correct trial"))
            continue
        problem = result.problem
        best = result.best[0]
        times, rel, why = retime(op, problem, best.config, result.target)
        torch_best = min(v for k, v in times.items() if k != "tilesearch")
        rows.append(dict(layer=name, params=params, sizes=list(op.sizes(problem)), tune_s=tune_s,
                         statuses=result.statuses, config=best.config, tuned_ms=best.latency_ms, times_ms=times,
                         tflops=op.flops(problem) / times["tilesearch"] / 1e9, rel_err=rel, check=why or "ok",
                         speedup_vs_best_torch=torch_best / times["tilesearch"], gpu=result.target.gpu))
        print(f"{name}: tuned in {tune_s:.0f} s {result.statuses}; best {best.config}", flush=True)

    (out / "moe.json").write_text(json.dumps(rows, indent=1, default=str))
    print(f"\n{'layer':<13} {'rows/expert':>12} {'n x k':>12} {'tilesearch':>11} {'TFLOP/s':>8} "
          f"{'_grouped_mm':>12} {'matmul loop':>12} {'vs best torch':>14} {'check':>6}")
    for r in rows:
        if "error" in r:
            print(f"{r['layer']:<13} {r['error']} {r['statuses']}")
            continue
        t = r["times_ms"]
        grouped = f"{t['torch._grouped_mm']:.3f} ms" if "torch._grouped_mm" in t else "n/a"
        print(f"{r['layer']:<13} {min(r['sizes']):>5}-{max(r['sizes']):<6} {r['params']['n']:>5}x{r['params']['k']:<6} "
              f"{t['tilesearch']:>8.3f} ms {r['tflops']:>8.0f} {grouped:>12} {t['matmul loop']:>9.3f} ms "
              f"{r['speedup_vs_best_torch']:>13.2f}x {r['check']:>6}")


if __name__ == "__main__":
    main()
