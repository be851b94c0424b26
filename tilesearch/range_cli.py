"""``tilesearch tune``, ``show`` and ``export`` when a parameter is a range (``m=1..16384``).

:mod:`tilesearch.cli` hands its ``key=value`` pairs here when one value is a range; errors are
raised as its ``UsageError`` (exit code 2, one line).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

RANGE_KEYS = ("sizes", "tolerance", "heldout", "probes", "refine")  # RangeSettings.keys(), without importing it


def has_range(pairs: dict[str, str]) -> bool:
    from tilesearch.ranges import is_range

    return any(is_range(v) for k, v in pairs.items() if k != "op")


def tune(pairs: dict[str, str], usage_error: type[Exception]) -> int:
    from tilesearch.range_tuner import RangeSettings, certify, tune_range
    from tilesearch.tuner import TuneSettings

    settings, ranges, op, rest = _parse(pairs, usage_error, TuneSettings.keys() + RANGE_KEYS)
    tune_settings = TuneSettings(**{"strategy": "xgb", **settings})
    range_settings = RangeSettings(**ranges)
    if tune_settings.progress:  # one line per size on stderr, beside each size's own progress
        _print_sizes()
    result = _guarded(usage_error, lambda: tune_range(op, rest, settings=tune_settings, ranges=range_settings))
    if range_settings.heldout:
        result = _guarded(usage_error, lambda: certify(result, settings=tune_settings, heldout=range_settings.heldout))
    print(report(result))
    return 0


def show(pairs: dict[str, str], usage_error: type[Exception]) -> int:
    from tilesearch import range_tuner

    _, _, op, rest = _parse(pairs, usage_error, ("storage",))
    storage = pairs.get("storage")
    key = _key(op, rest, usage_error)
    found = range_tuner.find(storage, op, key)
    if not found:
        raise usage_error(f"no tuned range {op} {key} in the storage; run tilesearch tune with the range first")
    print("\n\n".join(report(r) for r in found))
    return 0


def export(pairs: dict[str, str], usage_error: type[Exception]) -> int:
    from tilesearch import range_tuner
    from tilesearch.deploy import ArtifactError
    from tilesearch.deploy.dispatch import export_range

    _, _, op, rest = _parse(pairs, usage_error, ("storage", "out", "arch"))
    if not pairs.get("out"):
        raise usage_error("out=DIR is required: the directory to write the dispatch artifact to")
    found = range_tuner.find(pairs.get("storage"), op, _key(op, rest, usage_error), pairs.get("arch"))
    if not found:
        raise usage_error(f"no tuned range {op} {_key(op, rest, usage_error)} in the storage; tune it first")
    if len({r.arch for r in found}) > 1:
        raise usage_error(f"the range was tuned for several architectures ({', '.join(sorted({r.arch for r in found}))}); pass arch=...")
    result = max(found, key=lambda r: len(r.heldout))
    try:
        meta = export_range(result, pairs["out"])
    except (ArtifactError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    print(f"exported {op} {result.key} for {result.arch} to {pairs['out']}: {len(meta['buckets'])} buckets")
    print(f"load it with tilesearch.load({pairs['out']!r})")
    return 0


def report(result: Any) -> str:
    """The buckets and, once certified, the held-out sizes, as text."""
    from tilesearch.range_tuner import summary

    replay = " [replayed]" if result.replayed else ""
    lines = [f"range: {result.op} {result.key} on {result.gpu} ({result.arch}){replay}",
             f"tuned sizes: {', '.join(str(s) for s in result.studies if s not in result.probes)}",
             *([f"probed sizes (the tuned sizes' winners timed, nothing searched): "
                f"{', '.join(map(str, result.probes))}"] if result.probes else []),
             f"buckets (a configuration within {100 * result.tolerance:.0f}% of the best at every measured size in it):"]
    for b in result.buckets:
        knobs = ", ".join(f"{k}={v}" for k, v in b.config.items())
        lines.append(f"  {result.name}={b.lo}..{b.hi}: measured at {', '.join(map(str, b.tuned))}, "
                     f"worst loss {100 * b.worst_loss:.1f}%: {knobs}")
    if result.heldout:
        lines.append("held-out sizes (not tuned), dispatched kernel against tuning exactly that size:")
        lines.append(f"  {result.name:>6} bucket  dispatched_ms  best_ms  regret  vs_baseline")
        for r in result.heldout:
            regret = f"{100 * r.regret:5.1f}%" if r.regret is not None else "  n/a "
            ratio = f"{r.vs_baseline:.2f}x" if r.vs_baseline else "n/a"
            ms = f"{r.dispatched_ms:.4g}" if r.dispatched_ms is not None else "n/a"
            best = f"{r.best_ms:.4g}" if r.best_ms is not None else "n/a"
            lines.append(f"  {r.size:>6} {r.bucket:>6}  {ms:>13}  {best:>7}  {regret}  {ratio:>11}"
                         + (f"  ({r.note})" if r.note else ""))
        s = summary(result.heldout)
        if s["median_regret"] is not None:
            vs = f"{s['geomean_vs_baseline']:.2f}x" if s["geomean_vs_baseline"] else "n/a"
            lines.append(f"regret: median {100 * s['median_regret']:.1f}%, largest {100 * s['max_regret']:.1f}% "
                         f"over {s['measured']} sizes; against the baseline (geomean) {vs}")
    return "\n".join(lines)


def _parse(pairs: dict[str, str], usage_error: type[Exception], setting_keys: tuple[str, ...]):
    from dataclasses import fields

    from tilesearch import registry
    from tilesearch.cli import coerce
    from tilesearch.range_tuner import RangeSettings
    from tilesearch.tuner import TuneSettings

    if "op" not in pairs:
        raise usage_error(f"op=NAME is required; registered ops: {', '.join(sorted(registry.available()))}")
    try:
        op = registry.load(pairs["op"])
    except registry.UnknownOperatorError as exc:
        raise usage_error(str(exc)) from None
    defaults = {f.name: f.default for f in fields(TuneSettings)} | {f.name: f.default for f in fields(RangeSettings)}
    settings, ranges, rest = {}, {}, {}
    for key, raw in pairs.items():
        if key == "op":
            continue
        if key in RANGE_KEYS and key in setting_keys:
            ranges[key] = coerce(key, raw, defaults[key])
        elif key in setting_keys:
            settings[key] = coerce(key, raw, defaults.get(key, ""))
        elif key in {p.name for p in op.params}:
            rest[key] = raw
        else:
            known = ", ".join([p.name for p in op.params] + list(setting_keys))
            raise usage_error(f"unknown key {key!r}; {op.name} takes {known}")
    _key(op.name, rest, usage_error)
    return settings, ranges, op.name, rest


def _key(op: str, rest: dict[str, Any], usage_error: type[Exception]) -> str:
    from tilesearch import ranges, registry
    from tilesearch.op import ProblemError

    operator = registry.load(op)
    try:
        size_range, others = ranges.parse(operator, rest)
        if size_range is None:
            raise ranges.RangeError("no range given")
        return ranges.range_key(operator, size_range, others)
    except ProblemError as exc:
        raise usage_error(str(exc)) from None


def _guarded(usage_error: type[Exception], run: Any) -> Any:
    from tilesearch.database import StorageError
    from tilesearch.op import ProblemError
    from tilesearch.range_tuner import NoBucketsError
    from tilesearch.runner import NoDeviceError, UnknownRunnerError
    from tilesearch.strategy import UnknownStrategyError

    try:
        return run()
    except NoDeviceError as exc:
        raise usage_error(f"{exc}: tune measures on a CUDA GPU; run it on a machine with one") from None
    except (StorageError, UnknownRunnerError, UnknownStrategyError, ProblemError, NoBucketsError) as exc:
        raise usage_error(str(exc)) from None


class _Stderr(logging.Handler):
    """Writes each range line to the ``sys.stderr`` of the moment (not the one at setup)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"range: {record.getMessage()}", file=sys.stderr, flush=True)


def _print_sizes() -> None:
    from tilesearch.range_tuner import log

    if not any(isinstance(h, _Stderr) for h in log.handlers):
        log.addHandler(_Stderr())
        log.setLevel(logging.INFO)
