"""Results recorded by the experiment scripts before the shared runner, read as its results.

The figures of earlier runs stay readable: RESULTS.md cites them, and ``replot=`` draws them
again. Each reader maps one old layout onto the runner's (``problems`` with ``searches`` and a
``retime`` of entries); what an old run did not record (intervals, the searches of einsum-sum)
is left out, never made up.
"""

from __future__ import annotations

from typing import Any


def upgrade(data: Any) -> Any:
    """``data`` in the runner's layout if it is an old one this module knows; else unchanged."""
    if isinstance(data, list) and data and isinstance(data[0], dict) and "tool" in data[0]:
        data = {"tools": data}  # the first peers_gemm runs wrote their rows alone
    if isinstance(data, dict) and "tools" in data:
        return _peers_gemm(data)
    if isinstance(data, dict) and isinstance(data.get("problems"), dict):
        return _einsum_sum_bench(data)
    return data


def _peers_gemm(old: dict[str, Any]) -> dict[str, Any]:
    """A ``peers_gemm.json`` written before the shared runner (``{"tools": rows, "retime":
    {tool: {"ms", "rel_err"}}}``) as an experiment's result: the tools' own runs are its
    searches, the re-time its entries (medians only: those runs kept no intervals)."""
    rows, together = old["tools"], old.get("retime") or {}
    flops = old.get("flops") or rows[0]["tflops"] * 1e12 * rows[0]["best_ms"] * 1e-3
    searches = [{"strategy": r["tool"], "label": r["tool"], "seed": 0, "repeat": 0, "trials": r.get("trials", r["configs"]),
                 "measured_now": r.get("trials", r["configs"]), "wall_s": r["wall_s"], "best_ms": r["best_ms"],
                 "best_config": r.get("best_config"), "statuses": r.get("statuses", {}), "study": "", "final": None}
                for r in rows]
    base = together.get("torch.matmul", {}).get("ms")
    entries = [{"label": name, "kind": "tilesearch" if name.startswith("tilesearch") else "peer", "config": None,
                "result": {"status": "ok", "latency_ms": t["ms"], "rel_err": t.get("rel_err"),
                           "tflops": flops / (t["ms"] * 1e-3) / 1e12, "speedup": base / t["ms"] if base else None}}
               for name, t in together.items()]
    retime = {"entries": entries, "ties": [], "basis": "none", "together": True, "replayed": False} if entries else None
    return {"experiment": {"name": "peers_gemm", "op": "gemm", "title": old.get("title", "GEMM peers (recorded)")},
            "problems": [{"key": "recorded run", "flops": flops, "searches": searches, "retime": retime,
                          "replayed": False}], "replayed": False, "skipped": []}


def _einsum_sum_bench(old: dict[str, Any]) -> dict[str, Any]:
    """An ``einsum_sum_bench.json`` written before the shared runner (``{"problems": {name:
    {"problem", "algorithms": {alg: {config, latency_ms, rel_fro...}}, "timings_ms": {...}}}}``):
    each problem's interleaved timings are its re-time (medians only), the kernels labelled by
    algorithm, PyTorch, the copy and the memset as peers. A problem that failed has no re-time."""
    from tilesearch import registry

    op = registry.load("einsum_sum")
    problems = []
    for name, entry in old["problems"].items():
        if not isinstance(entry, dict) or "problem" not in entry:
            raise ValueError(f"problem {name!r} has no parameters")
        problem = op.problem(**entry["problem"])
        timings = entry.get("timings_ms") or {}
        algorithms = entry.get("algorithms") or {}
        base = timings.get("pytorch")
        errors = {**{alg: a.get("rel_fro") for alg, a in algorithms.items()},
                  "pytorch": (entry.get("pytorch") or {}).get("rel_fro")}
        entries = [{"label": label, "kind": "tilesearch" if label in algorithms else "peer",
                    "config": (algorithms.get(label) or {}).get("config"),
                    "result": {"status": "ok", "latency_ms": ms, "speedup": base / ms if base else None,
                               "tflops": op.flops(problem) / ms / 1e9, "rel_err": errors.get(label)}}
                   for label, ms in timings.items()]
        entries += [{"label": alg, "kind": "tilesearch", "config": a.get("config"),
                     "result": {"status": "runtime_error", "error": a["error"]}}
                    for alg, a in algorithms.items() if "error" in a]
        retime = {"entries": entries, "ties": [], "basis": "none", "together": True, "replayed": False}
        problems.append({"problem": problem.to_dict(), "key": f"{name}: {problem.key}", "flops": op.flops(problem),
                         "searches": [], "retime": retime if timings else None, "replayed": False,
                         "error": entry.get("error")})
    return {"experiment": {"name": "einsum_sum_bench", "op": "einsum_sum", "title": "einsum-sum (recorded)"},
            "problems": problems, "replayed": False, "skipped": []}
