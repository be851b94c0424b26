"""A transformer MLP block with tuned GEMMs for every batch size: Llama-3-8B's gate/up/down.

``y = down(silu(gate(x)) * up(x))`` with hidden 4096 and intermediate 14336 (bias-free, bfloat16),
as in Llama-3-8B. Two GEMM shapes: ``n=14336, k=4096`` (gate and up) and ``n=4096, k=14336``
(down), each tuned once as a range ``m=1..16384`` (tokens per call). The block's three
``nn.Linear`` are swapped for :class:`tilesearch.nn.Linear` and run over several batch sizes:

- PyTorch eager, PyTorch ``torch.compile``, tilesearch eager, tilesearch under
  ``torch.compile(fullgraph=True, dynamic=True)`` (one graph for all batch sizes) and tilesearch
  in a CUDA graph;
- each output against the block computed in float64 (relative Frobenius error);
- each time with CUDA events (median of interleaved rounds, L2 flushed).

    python examples/llama_mlp.py --storage sqlite:///mlp.db --tune   # tune both ranges, then run
    python examples/llama_mlp.py --storage sqlite:///mlp.db          # ranges already tuned

Needs a CUDA GPU. ``main()`` returns the table as a list of rows (the GPU experiment calls it).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

HIDDEN, INTERMEDIATE = 4096, 14336  # Llama-3-8B
BATCHES = (1, 16, 128, 1000, 4096)


def mlp(hidden: int, inter: int, dtype: Any, seed: int = 0) -> Any:
    import torch

    torch.manual_seed(seed)
    block = torch.nn.ModuleDict({
        "gate": torch.nn.Linear(hidden, inter, bias=False),
        "up": torch.nn.Linear(hidden, inter, bias=False),
        "down": torch.nn.Linear(inter, hidden, bias=False),
    })
    return block.to(device="cuda", dtype=dtype)


def forward(block: Any, x: Any) -> Any:
    import torch

    return block["down"](torch.nn.functional.silu(block["gate"](x)) * block["up"](x))


def reference(block: Any, x: Any) -> Any:
    """The block in float64 from the same (rounded) weights and inputs."""
    import torch

    w = {name: layer.weight.double() for name, layer in block.items()}
    x = x.double()
    return (torch.nn.functional.silu(x @ w["gate"].T) * (x @ w["up"].T)) @ w["down"].T


def tune_ranges(storage: str, hidden: int, inter: int, dtype: str, *, trials: int, sizes: int, heldout: int) -> None:
    """Tunes the two GEMM ranges of the block (already tuned sizes are reused)."""
    from tilesearch.range_tuner import RangeSettings, certify, tune_range
    from tilesearch.tuner import TuneSettings

    settings = TuneSettings(strategy="xgb", trials=trials, storage=storage, progress=False)
    for n, k in ((inter, hidden), (hidden, inter)):
        result = tune_range("gemm", {"m": "1..16384", "n": n, "k": k, "dtype": dtype, "layout": "nt"},
                            settings=settings, ranges=RangeSettings(sizes=sizes, heldout=heldout))
        if heldout:
            certify(result, settings=settings, heldout=heldout)


def main(*, storage: str, hidden: int = HIDDEN, inter: int = INTERMEDIATE, dtype: str = "bfloat16",
         batches: tuple[int, ...] = BATCHES, cache_dir: str | None = None) -> list[dict[str, Any]]:
    import copy

    import torch

    from tilesearch.nn import swap_linears

    torch_dtype = getattr(torch, dtype)
    block = mlp(hidden, inter, torch_dtype)
    tuned = swap_linears(copy.deepcopy(block), storage=storage, cache_dir=cache_dir)
    compiled_torch = torch.compile(lambda x: forward(block, x), dynamic=True)
    compiled_tuned = torch.compile(lambda x: forward(tuned, x), fullgraph=True, dynamic=True)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ways = {"torch eager": lambda x: forward(block, x), "torch.compile": compiled_torch,
            "tilesearch eager": lambda x: forward(tuned, x), "tilesearch compiled": compiled_tuned}
    return [_row(ways, block, tuned, torch.randn(batch, hidden, device="cuda", dtype=torch_dtype), l2)
            for batch in batches]


def _row(ways: dict[str, Any], block: Any, tuned: Any, x: Any, l2: int) -> dict[str, Any]:
    """One batch size: every way's error against float64 and its time."""
    import torch

    from tilesearch.runner.measure import MeasureSettings, bench

    ref = reference(block, x)
    static_x = x.clone()
    forward(tuned, static_x)  # loads modules and allocates workspaces before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = forward(tuned, static_x)
    calls = {name: (lambda way=way: way(x)) for name, way in ways.items()}
    calls["tilesearch graph"] = lambda: (graph.replay(), static_y)[1]
    row: dict[str, Any] = {"batch": x.shape[0]}
    for name, run in calls.items():
        out = run()
        torch.cuda.synchronize()
        row[f"{name} err"] = ((out.double() - ref).norm() / ref.norm()).item()
    times = bench(list(calls.values()), MeasureSettings(), l2)
    row.update({f"{name} ms": ms for name, ms in zip(calls, times)})
    return row


def _print(rows: list[dict[str, Any]]) -> None:
    ways = [k.removesuffix(" ms") for k in rows[0] if k.endswith(" ms")]
    print(f"{'batch':>6}  " + "  ".join(f"{w:>20}" for w in ways))
    for row in rows:
        cells = [f"{row[w + ' ms']:8.3f} ms {row[w + ' err']:.0e}" for w in ways]
        print(f"{row['batch']:>6}  " + "  ".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", default="sqlite:///mlp.db")
    parser.add_argument("--tune", action="store_true", help="tune both GEMM ranges first")
    parser.add_argument("--trials", type=int, default=8, help="configurations per tuned size")
    parser.add_argument("--sizes", type=int, default=4, help="sizes tuned per range")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args()
    if args.tune:
        tune_ranges(args.storage, HIDDEN, INTERMEDIATE, "bfloat16", trials=args.trials, sizes=args.sizes, heldout=0)
    table = main(storage=args.storage, batches=tuple(int(b) for b in args.batches.split(",")))
    _print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=2)
