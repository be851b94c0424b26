"""What an experiment writes: the JSON of everything, the table (also printed last), the PNG.

The JSON is the record; the table and the plot are drawn from it alone, so ``--replot`` of a
recorded run draws the same figures without a GPU (:func:`load` then :func:`plot`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tilesearch.experiment import recorded
from tilesearch.experiment.config import EVERY, ExperimentError


def write(result: dict[str, Any], out: Path, name: str) -> None:
    """``<name>.json``, ``<name>.txt`` and, where matplotlib is installed, ``<name>.png``; each
    written to a temporary name first, so a killed run leaves no half file."""
    _atomic(out / f"{name}.json", json.dumps(result, indent=1, default=str))
    _atomic(out / f"{name}.txt", table(result) + "\n")
    plot(result, out / f"{name}.png")


def load(path: str | Path) -> dict[str, Any]:
    """A recorded ``<name>.json``, or the JSON of a script before this runner that
    :mod:`tilesearch.experiment.recorded` reads as one; :class:`ExperimentError` says why a file
    is not one."""
    try:
        result = json.loads(Path(path).read_text())
        result = recorded.upgrade(result)
        result["problems"][0]["searches"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise ExperimentError(f"{path} is not an experiment's JSON ({type(e).__name__}: {e}); "
                              "pass the file a run wrote") from None
    return result


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def table(result: dict[str, Any]) -> str:
    """Per problem: each search (its own best), then the re-time (every entry with its interval
    and its ratio to the baseline, ``*`` marking the tie set)."""
    title = result["experiment"].get("title") or result["experiment"]["name"]
    lines = [title + (" [replayed]" if result.get("replayed") else "")]
    for prob in result["problems"]:
        lines.append(f"\n{result['experiment']['op']} {prob['key']}")
        lines.append(f"  {'search':<16}{'trials':>7}{'new':>5}{'wall_s':>9}{'best_ms':>10}"
                     f"{'final x base [95%]':>28}{'ties':>5}{'MHz':>6}")
        for s in prob["searches"]:
            f = s.get("final") or {}
            final = (f"{f['speedup']:.3f} [{f['speedup_low']:.3f}, {f['speedup_high']:.3f}]"
                     if f.get("speedup_low") is not None else "-")
            trials = "all" if s["trials"] >= EVERY else s["trials"]
            lines.append(f"  {s.get('label', s['strategy']):<16}{trials:>7}{s['measured_now']:>5}"
                         f"{s['wall_s']:>9.1f}{_fmt(s['best_ms'], '.4f'):>10}{final:>28}"
                         f"{_fmt(f.get('ties'), 'd'):>5}{_fmt(f.get('sm_clock_mhz'), '.0f'):>6}")
        retime = prob.get("retime")
        if not retime:
            continue
        how = "together, interleaved" if retime["together"] else "each alone (no interleaving)"
        lines.append(f"  re-timed {how}:")
        lines.append(f"  {'entry':<22}{'ms':>9}{'95% interval':>20}{'TFLOP/s':>9}{'x base':>8}{'rel_err':>10}  status")
        for e in retime["entries"]:
            r = e["result"]
            interval = (f"[{r['latency_low']:.4f}, {r['latency_high']:.4f}]"
                        if r.get("latency_low") is not None else "-")
            mark = "*" if e["label"] in retime["ties"] else " "
            lines.append(f" {mark}{e['label']:<22}{_fmt(r.get('latency_ms'), '.4f'):>9}{interval:>20}"
                         f"{_fmt(r.get('tflops'), '.1f'):>9}{_fmt(r.get('speedup'), '.3f'):>8}"
                         f"{_fmt(r.get('rel_err'), '.2e'):>10}  {r['status']}")
        for name, note in (retime.get("ablations") or {}).items():
            lines.append(f"  ablation {name:<14} gain {_fmt(note.get('gain'), '.3f'):>6}  {note['status']}"
                         + (f" ({note['reason']})" if note.get("reason") else ""))
    return "\n".join(lines)


def plot(result: dict[str, Any], path: str | Path) -> bool:
    """One panel per problem: every re-timed entry's TFLOP/s with its interval, ours and the
    peers in different colours; ``False`` (and no file) without matplotlib or re-times."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = [p for p in result["problems"] if p.get("retime")]
    if not panels:
        return False
    if result["experiment"].get("x"):
        return _series(plt, result, panels, Path(path))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 1 + 0.4 * max(
        len(p["retime"]["entries"]) for p in panels)), squeeze=False)
    for ax, prob in zip(axes[0], panels):
        entries = [e for e in prob["retime"]["entries"] if e["result"].get("latency_ms")]

        def tflops(ms: float, flops: float = prob["flops"]) -> float:
            return flops / ms / 1e9

        speed = [tflops(e["result"]["latency_ms"]) for e in entries]
        err = [[max(0.0, s - tflops(e["result"].get("latency_high") or e["result"]["latency_ms"]))
                for s, e in zip(speed, entries)],
               [max(0.0, tflops(e["result"].get("latency_low") or e["result"]["latency_ms"]) - s)
                for s, e in zip(speed, entries)]]
        ax.barh([e["label"] for e in entries], speed, xerr=err,
                color=[{"tilesearch": "tab:green", "ablation": "tab:gray"}.get(e["kind"], "tab:red") for e in entries])
        ax.invert_yaxis()
        ax.set_xlabel("TFLOP/s, re-timed together (95% interval)")
        ax.set_title(prob["key"], fontsize=9)
    fig.suptitle((result["experiment"].get("title") or result["experiment"]["name"])
                 + (" [replayed]" if result.get("replayed") else ""), fontsize=10)
    fig.tight_layout()
    tmp = Path(path).with_name(Path(path).name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return True


def _series(plt: Any, result: dict[str, Any], panels: list[dict[str, Any]], path: Path) -> bool:
    """TFLOP/s against the problem parameter ``x``: a line per swept configuration (its varied
    knobs) and per peer, each point re-timed together with the others of its problem."""
    x = result["experiment"]["x"]
    varied = [k for k, v in (result["experiment"].get("knobs") or {}).items() if len(v) > 1]
    lines: dict[str, list[tuple[Any, float]]] = {}
    for prob in panels:
        for e in prob["retime"]["entries"]:
            if e["result"].get("latency_ms"):
                name = (" ".join(f"{k}={e['config'][k]}" for k in varied) or e["label"]) if e["config"] else e["label"]
                lines.setdefault(name, []).append((prob["problem"][x], prob["flops"] / e["result"]["latency_ms"] / 1e9))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in lines.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xlabel(x)
    ax.set_ylabel("TFLOP/s, re-timed together per problem")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(result["experiment"].get("title") or result["experiment"]["name"], fontsize=10)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return True
