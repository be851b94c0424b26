"""Which GEMM configurations win on the shapes models run, and what cuBLAS launches there.

For each shape, a grid of configurations of ``op=gemm`` (the template's knobs, swapped tiles and
the wider ``block_n`` set among them) is compiled in the compile pool, then checked against
float64 and timed together with ``torch.matmul`` in a fresh worker (the final re-time's
method: interleaved rounds, L2 flushed, 95% intervals). Then, in this process, PyTorch's profiler
records the kernels ``torch.matmul`` launches at each shape (cuBLAS's kernel names carry their
tile and cluster shapes), their grids and times, beside the fastest configuration's kernels.
A look at the field before the knobs are searched; not a result of the search.

usage: python scripts/gemm_probe.py out=$OUT [shapes=decode16,qkv512] [workers=15] [timeout=120]
(the stream-K shapes qkv784 ... o2657: TILESEARCH_STREAM_K=1 python scripts/gemm_probe.py ...)
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BASE = dict(block_k=64, num_stages=3, threads=128, panel_size=8, warp_policy="full_row", split_k=1,
            persistent=False, epilogue="direct", tma=True, warp_specialize="on", swap_ab=False, raster="row")


def grid(**axes: Any) -> list[dict[str, Any]]:
    names = list(axes)
    return [{**BASE, **dict(zip(names, values))} for values in itertools.product(*axes.values())]


def decode(block_m: int) -> list[dict[str, Any]]:
    swapped = grid(swap_ab=[True], block_m=[block_m], block_n=[64, 128, 256], block_k=[64, 128],
                   num_stages=[3, 5], split_k=[1, 2, 4, 8])
    plain = grid(block_m=[64], block_n=[128, 256], block_k=[128], num_stages=[3], split_k=[1, 2, 4, 8],
                 warp_policy=["square"])
    return swapped + plain


def wide(m: int) -> list[dict[str, Any]]:
    out = grid(block_m=[128], block_n=[96, 128, 192, 256], num_stages=[3, 4], threads=[128, 256], split_k=[1, 2])
    out += grid(block_m=[256], block_n=[96, 128, 192], num_stages=[3, 4], threads=[256], split_k=[1])
    out += grid(block_m=[64], block_n=[96, 128, 192, 256], num_stages=[4], threads=[128], split_k=[1])
    return out


def tail(n: int) -> list[dict[str, Any]]:
    """Mid-size M, where the tiles fill a few waves and a fraction: the kernels the range chose
    there (H200, 6144x4096), beside the stream-K program on three tile shapes (needs
    TILESEARCH_STREAM_K=1, which puts the knob in the space)."""
    base = {**BASE, "threads": 256, "warp_policy": "full_row", "epilogue": "smem", "stream_k": 1}
    narrow = 192 if n % 192 == 0 else 128
    template = [{**base, **knobs} for knobs in (
        dict(block_m=128, block_n=narrow, num_stages=5, panel_size=16),
        dict(block_m=128, block_n=256, num_stages=4, panel_size=8),
        dict(block_m=128, block_n=narrow, num_stages=4, panel_size=16, persistent=True),
        dict(block_m=128, block_n=256, num_stages=3, panel_size=8, persistent=True),
        dict(block_m=256, block_n=128, num_stages=4, panel_size=8))]
    streamed = [{**base, "block_m": bm, "block_n": bn, "num_stages": stages, "epilogue": epilogue, "persistent": True,
                 "stream_k": slices, "panel_size": 8}
                for bm, bn, smem_stages in ((128, 256, 3), (128, narrow, 4), (256, 128, 3))
                for epilogue, stages in (("smem", smem_stages), ("direct", 4)) for slices in (2, 3, 4)]
    return template + streamed


SHAPES = {  # name: (m, n, k, dtype, layout), configurations
    "decode1": ((1, 4096, 4096, "bfloat16", "nt"), decode(16)),
    "decode16": ((16, 4096, 4096, "bfloat16", "nt"), decode(16)),
    "qkv16": ((16, 6144, 4096, "bfloat16", "nt"), decode(16)),
    "gateup16": ((16, 28672, 4096, "bfloat16", "nt"), decode(16)),
    "down16": ((16, 4096, 14336, "bfloat16", "nt"), decode(16)),
    "decode64": ((64, 4096, 4096, "bfloat16", "nt"), decode(64)),
    "suite128": ((128, 8192, 8192, "float16", "nn"), decode(128)[:24] + grid(block_m=[128], block_n=[128, 256],
                                                                               split_k=[1, 2, 4], threads=[256])),
    "qkv512": ((512, 4608, 3584, "float16", "nt"), wide(512)),
    "o2048": ((2048, 4096, 4096, "bfloat16", "nt"), wide(2048)),
    **{f"{name}{m}": ((m, n, 4096, "bfloat16", "nt"), tail(n)) for name, n in (("qkv", 6144), ("o", 4096))
       for m in (784, 1000, 2657)},
}


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    out = Path(opts.get("out") or os.environ.get("OUT") or "probe-out")
    out.mkdir(parents=True, exist_ok=True)
    names = opts["shapes"].split(",") if "shapes" in opts else list(SHAPES)
    from tilesearch import registry
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Candidate, Status
    from tilesearch.runner import MeasureSettings
    from tilesearch.runner.local import LocalRunner

    op = registry.load("gemm")
    runner = LocalRunner(settings=MeasureSettings(final_processes=1), timeout=float(opts.get("timeout", 120)))
    target = runner.start()
    todo: dict[str, list[Candidate]] = {}
    for name in names:
        (m, n, k, dtype, layout), configs = SHAPES[name]
        problem = op.problem(m=m, n=n, k=k, dtype=dtype, layout=layout)
        space = op.space(problem, target)
        valid = [c for c in configs if space.why_invalid(c) is None]
        todo[name] = [Candidate("gemm", dict(problem), c, target) for c in valid]
        print(f"{name}: {len(valid)} of {len(configs)} configurations valid", flush=True)
    began = time.time()
    with LocalBuilder(workers=int(opts.get("workers", 15)), timeout=600) as builder:
        futures = {name: [builder.submit(c) for c in cands] for name, cands in todo.items()}
        built = {name: [c for c, f in zip(todo[name], fs) if f.result().ok] for name, fs in futures.items()}
    print(f"compiled in {time.time() - began:.0f} s", flush=True)
    report: dict[str, Any] = {}
    for name in names:
        results = runner.retime(built[name])
        rows = sorted(((r.speedup or 0.0, r, c.config) for c, r in zip(built[name], results) if r.status == Status.OK),
                      key=lambda t: -t[0])
        bad = [(c.config, r.status.value, (r.error or "")[:200]) for c, r in zip(built[name], results)
               if r.status != Status.OK]
        report[name] = {"problem": dict(built[name][0].problem) if built[name] else None,
                        "rows": [{"speedup": s, "low": r.speedup_low, "high": r.speedup_high, "ms": r.latency_ms,
                                  "torch_ms": r.baseline_ms, "rel_err": r.rel_err, "config": cfg} for s, r, cfg in rows],
                        "failed": bad}
        print(f"== {name}: {len(rows)} timed, {len(bad)} failed", flush=True)
        for s, r, cfg in rows[:6]:
            print(f"  {s:.3f} [{r.speedup_low:.3f},{r.speedup_high:.3f}] {r.latency_ms * 1e3:.1f}us "
                  f"torch {r.baseline_ms * 1e3:.1f}us  {_short(cfg)}", flush=True)
        for cfg, status, err in bad[:3]:
            print(f"  FAILED {status}: {_short(cfg)}: {err}", flush=True)
        (out / "gemm_probe.json").write_text(json.dumps(report, indent=1, default=str))
    runner.close()
    report["kernels"] = kernels(op, target, report)
    (out / "gemm_probe.json").write_text(json.dumps(report, indent=1, default=str))
    print("\nshape | best ratio [95%] | best config | cuBLAS kernels (grid, us) | ours (grid, us)")
    for name in names:
        rows = report[name]["rows"]
        if not rows:
            continue
        best = rows[0]
        ks = report["kernels"].get(name, {})
        cublas = "; ".join(f"{k['name'][:70]} {k['grid']} {k['us']:.1f}" for k in ks.get("torch", []))
        ours = "; ".join(f"{k['grid']} {k['us']:.1f}" for k in ks.get("ours", []))
        print(f"{name} | {best['speedup']:.3f} [{best['low']:.3f},{best['high']:.3f}] | {_short(best['config'])} | "
              f"{cublas} | {ours}")
    return 0


def pair(op: Any, problem: Any, config: dict[str, Any], target: Any) -> tuple[Any, Any]:
    """``torch.matmul`` and the built configuration as two calls on the same random inputs."""
    import torch

    kernel = op.build(problem, config, target)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    inputs = op.make_inputs(problem, torch.device("cuda"), gen)
    outputs = op.make_outputs(problem, torch.device("cuda"))
    return op.baseline(problem, inputs), lambda: kernel(*inputs, *outputs)


def kernels(op: Any, target: Any, report: dict[str, Any]) -> dict[str, Any]:
    """The kernels ``torch.matmul`` and the fastest configuration launch at each shape, from
    PyTorch's profiler (names, grids, device times), each call after an L2 flush."""
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(2 * target.l2_bytes, dtype=torch.int8, device="cuda")
    calls = []
    for name, entry in report.items():
        if not entry["rows"]:
            continue
        base, ours = pair(op, op.problem(**entry["problem"]), entry["rows"][0]["config"], target)
        for fn in (base, ours):
            for _ in range(3):
                fn()
        calls.append((name, base, ours))
    torch.cuda.synchronize()
    found: dict[str, Any] = {}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for name, base, ours in calls:
            for who, fn in (("torch", base), ("ours", ours)):
                flush.zero_()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push(f"{name}|{who}")
                fn()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
    path = Path(tempfile.mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    events.sort(key=lambda e: e["ts"])
    kernels_only = [e for e in events if "fill" not in e["name"].lower() and "elementwise" not in e["name"].lower()]
    # the calls ran one after another, synchronised, in this order: torch, ours per shape
    order = [(name, who) for name, _, _ in calls for who in ("torch", "ours")]
    groups = _split(kernels_only, len(order))
    for (name, who), group in zip(order, groups):
        found.setdefault(name, {})[who] = [{"name": e["name"], "grid": e["args"].get("grid"),
                                            "block": e["args"].get("block"), "us": e["dur"],
                                            "regs": e["args"].get("registers per thread"),
                                            "smem": e["args"].get("shared memory")} for e in group]
    return found


def _split(events: list[dict[str, Any]], parts: int) -> list[list[dict[str, Any]]]:
    """Kernels grouped by call: a call's kernels follow each other closely; calls are separated
    by a synchronisation (the largest gaps)."""
    if not events:
        return [[] for _ in range(parts)]
    gaps = sorted(range(1, len(events)), key=lambda i: events[i]["ts"] - (events[i - 1]["ts"] + events[i - 1]["dur"]),
                  reverse=True)[:parts - 1]
    cuts = [0, *sorted(gaps), len(events)]
    return [events[a:b] for a, b in zip(cuts, cuts[1:])]


def _short(cfg: dict[str, Any]) -> str:
    keep = [f"{cfg['block_m']}x{cfg['block_n']}x{cfg['block_k']}", f"s{cfg['num_stages']}", f"t{cfg['threads']}"]
    for key, label in (("split_k", "splitK"), ("stream_k", "streamK"), ("swap_ab", "swap"), ("persistent", "pers"), ("epilogue", ""),
                       ("warp_specialize", "ws"), ("warp_policy", "")):
        if cfg.get(key) != BASE.get(key, 1 if key == "stream_k" else None):
            keep.append(f"{label}{cfg[key]}" if label else str(cfg[key]))
    return " ".join(keep)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
