"""Tuning a size range (``m=1..16384``): which sizes to tune, the buckets, certified regret.

Call order: :func:`tune_range` tunes a few sizes with :func:`~tilesearch.tuner.tune` (the ends
and the geometric middle first; ``xgb`` by default, which trains on the op's other studies in
the storage, so each new size starts from what the tuned ones taught it), measures every
size's winner at every other tuned size, and makes buckets from that table
(:func:`tilesearch.buckets.cover`). Where neighbouring tuned sizes fall in different buckets,
or lie far apart in size or in time, it tunes one geometric midpoint (where the best latency
grows most, :func:`~tilesearch.buckets.next_sizes`) and decides again, until the buckets settle or ``sizes`` are tuned; then it adds a few
configurations to each size's search, now that the strategy can learn from all of them
(:func:`_refine`), times the winners and a short search at probe sizes
(:func:`~tilesearch.buckets.probe_sizes`) and decides once more. :func:`certify`
then tunes held-out sizes that were not tuned (marked so that no search learns from them) and sets
the dispatched configuration of each against that size's own best (its regret) and against the
op's PyTorch baseline. The result is kept in the storage (:func:`save`, :func:`find`), for
``tilesearch show`` and for export (:mod:`tilesearch.deploy.dispatch`).

The tuning loop itself is not changed: a range is many ordinary studies, one per size.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import optuna

from tilesearch import buckets as bucketing
from tilesearch import phases, registry, served
from tilesearch.buckets import Bucket, Table, config_key
from tilesearch.builder import Builder
from tilesearch.database import StorageError, TuningDatabase, find_studies, hold_out, open_storage, studies
from tilesearch.deploy.artifact import capability
from tilesearch.op import Operator, Problem
from tilesearch.ranges import SizeRange, parse, problem_at, range_key
from tilesearch.records import comparable_ms, fastest_first, has_result, is_correct
from tilesearch.runner import Runner
from tilesearch.space import Space
from tilesearch.strategy.hints import Hinted
from tilesearch.tuner import TuneResult, TuneSettings, close_stages, make_builder, make_runner, tune

RunnerFactory = Callable[[Problem], Runner]
log = logging.getLogger("tilesearch.range")
"""One line per size as it is tuned or certified: a range is minutes of work (the command line
and ``experiments/deploy_check.py`` print them; a killed run shows how far it got)."""


class NoBucketsError(LookupError):
    """No tuned size of a range has a correct configuration, so there is nothing to bucket."""


@dataclass(frozen=True)
class RangeSettings:
    """How a range is tuned (``key=value`` on the command line, like the tuning settings).

    Attributes:
        sizes: the most sizes to tune (each with ``trials`` configurations).
        tolerance: a bucket's configuration may be this much slower than a tuned size's best.
            At 3% (the default until 2026-11-28) one 10-stage 64x112 tile served 1..56 rows of a
            14336x4096 range on the H100, 2.2% behind the swapped 64-row tile that won at 1 to 25
            rows; held-out sizes there lost 2.4-3.0% to per-size searches, which put the median
            regret at the 3% target by themselves. More buckets cost one more compiled kernel
            each, nothing at run time. Probes and contenders keep the coarser
            :data:`~tilesearch.buckets.RESOLVED` (:func:`_margin`).
        heldout: sizes to certify after tuning (not among the tuned ones); 0: none.
        probes: sizes measured between each two neighbouring tuned sizes whose winners differ
            by more than :func:`_margin`, once the tuning is done: every tuned size's winners are
            timed there, then a few configurations of a short search (:func:`_probe`); 0: none.
        refine: configurations each tuned size's search adds once the sizes are settled, when
            ``xgb`` can learn from all of them (:func:`_refine`); 0: none.
    """

    sizes: int = 7
    tolerance: float = 0.01
    heldout: int = 8
    probes: int = 2
    refine: int = 3

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class Regret:
    """One held-out size: the dispatched configuration against that size's best and the baseline.

    Attributes:
        size: the held-out size.
        bucket: index of the bucket that serves it.
        dispatched_ms: latency of the bucket's configuration at this size.
        best_ms: latency of the best configuration tuned for exactly this size.
        baseline_ms: the op's PyTorch baseline (``torch.matmul``) at this size.
        how: ``study`` (both from the held-out size's study) or ``timed`` (timed side by side
            by the caller, e.g. the exported run-time-M kernel against the per-size best).
    """

    size: int
    bucket: int
    dispatched_ms: float | None
    best_ms: float | None
    baseline_ms: float | None = None
    how: str = "study"
    note: str = ""

    @property
    def regret(self) -> float | None:
        """``dispatched / best - 1``: what the bucket costs against tuning this size."""
        if self.dispatched_ms is None or not self.best_ms:
            return None
        return self.dispatched_ms / self.best_ms - 1

    @property
    def vs_baseline(self) -> float | None:
        """``baseline / dispatched``: above 1 is faster than PyTorch."""
        if self.dispatched_ms is None or not self.baseline_ms:
            return None
        return self.baseline_ms / self.dispatched_ms


@dataclass(frozen=True)
class RangeResult:
    """A tuned range: its buckets, the studies behind them and, once certified, the regrets."""

    op: str
    name: str
    lo: int
    hi: int
    params: dict[str, Any]
    arch: str
    gpu: str | None
    tolerance: float
    studies: dict[int, str]
    buckets: tuple[Bucket, ...]
    heldout: tuple[Regret, ...] = ()
    probes: tuple[int, ...] = ()  # the sizes of ``studies`` that were probed, not searched (RangeSettings.probes)
    replayed: bool = False
    trials: int = 0
    storage: str | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """``m=1..16384,n=4096,...``: the problem with the range in place."""
        return ",".join(f"{k}={self.lo}..{self.hi}" if k == self.name else f"{k}={v}" for k, v in self.params.items())

    @property
    def size_range(self) -> SizeRange:
        return SizeRange(self.name, self.lo, self.hi)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("storage")
        data["studies"] = {str(k): v for k, v in self.studies.items()}
        data["buckets"] = [b.to_dict() for b in self.buckets]
        data["heldout"] = [asdict(r) for r in self.heldout]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], storage: str | None = None) -> RangeResult:
        values = dict(data)
        values["studies"] = {int(k): v for k, v in data["studies"].items()}
        values["buckets"] = tuple(Bucket.from_dict(b) for b in data["buckets"])
        values["heldout"] = tuple(Regret(**r) for r in data.get("heldout", ()))
        values["probes"] = tuple(data.get("probes", ()))
        return cls(**values, storage=storage)


def tune_range(
    op: str | Operator,
    params: Mapping[str, Any] | None = None,
    *,
    settings: TuneSettings | None = None,
    ranges: RangeSettings | None = None,
    runner: str | RunnerFactory | None = None,
    **overrides: Any,
) -> RangeResult:
    """Tunes a range of one run-time parameter and decides its buckets.

    ``params`` (or keyword ``overrides``) hold the problem with one range (``m="1..16384"`` or
    ``m=(1, 16384)``), tuning settings (:class:`TuneSettings` fields; ``trials`` is per size;
    ``strategy`` defaults to ``xgb``) and :class:`RangeSettings` fields. ``runner`` is a runner
    name or a function giving each size's problem its runner (tests: a synthetic runner).
    Raises :class:`~tilesearch.ranges.RangeError` for a bad range.
    """
    operator, size_range, rest, settings, ranges = _split(op, params, settings, ranges, overrides)
    # every size measures the kernel the artifact dispatches, the range's parameter a run-time
    # value: one kernel a configuration, compiled once and found in TileLang's cache at every
    # other size. Compiled per size, on an H200 (2026-11-28, ``acf39a6``) a 4096x4096 range's
    # probes took 13-39 s each, 6-21 s of it waiting for compiles, and each cross-measurement
    # after a round of probes 1-2 minutes; the range had not reached its held-out sizes after
    # 1,313 s of three device calls (experiments/results/deploy/ranges_2026-11-28_h200_unfinished)
    settings = replace(settings, runtime=size_range.name)
    _hold_out_certified(operator, size_range, rest, settings.storage)
    tuned: dict[int, TuneResult] = {}
    sizes = sorted({size_range.lo, _geometric_middle(size_range), size_range.hi})
    with _Stages(settings, runner) as stages:

        def decide() -> tuple[Table, Any, list[Bucket]]:
            """Every tuned size's winners measured at every tuned size, and the buckets from that."""
            table = _cross_measure(operator, size_range, rest, tuned, settings, stages, _margin(ranges))
            if not table.latency:
                raise NoBucketsError(
                    f"no correct configuration at any tuned size of {operator.name} "
                    f"{range_key(operator, size_range, rest)}; tune more trials per size"
                )
            shape = _modelled(operator, size_range, rest, table, next(iter(tuned.values())).target)
            return table, shape, bucketing.cover(table, size_range.lo, size_range.hi, ranges.tolerance, shape)

        placed: list[int] | None = None
        while True:
            for size in sizes:
                tuned[size] = _tune_size(operator, size_range, rest, size, settings, stages,
                                         _nearest_best(operator, size_range, rest, tuned, size))
            record = (settings.storage, record_name(operator.name, range_key(operator, size_range, rest),
                                                    next(iter(tuned.values())).target.arch))
            if placed is None:
                placed = [int(size) for size in _recorded(*record)]
            _note(*record, list(tuned))
            again = [s for s in placed if s not in tuned][:max(0, ranges.sizes - len(tuned))]
            if again:  # placed by an earlier run of this range: tuned again as placed, see PLACED_ATTR
                sizes = again
                continue
            table, shape, found = decide()
            room = ranges.sizes - len(tuned)
            # one size a round: the table then has the last size's winners before the next is
            # placed, so the sizes go where the losses are, not all into the first round's gaps
            sizes = bucketing.next_sizes(found, list(tuned), min(room, 1), table, shape) if room > 0 else []
            if not sizes:
                break
        if ranges.refine > 0 and _refine(operator, size_range, rest, tuned, settings, stages, ranges.refine):
            table, shape, found = decide()
        probed: dict[int, TuneResult] = {}
        if ranges.probes > 0:
            between = bucketing.probe_sizes(found, list(tuned), ranges.probes, table, _margin(ranges), shape)
            rounds = _recorded(*record, PROBED_ATTR)
            # the probes, then where the winner changes, an edge is far, or the model puts the
            # serving configuration behind between two measured sizes
            for i in range(1 + bucketing.SPLIT_ROUNDS):
                if i < len(rounds):
                    between = [int(size) for size in rounds[i]]
                else:
                    rounds.append(sorted(between))
                    _note(*record, rounds, PROBED_ATTR)
                more = _probe(operator, size_range, rest, tuned, settings, stages, between, _margin(ranges), found, record)
                if not more:
                    break
                probed.update(more)
                tuned.update(more)
                table, shape, found = decide()
                between = sorted({*bucketing.split_sizes(table, _margin(ranges)), *bucketing.edge_sizes(found),
                                  *bucketing.modelled_sizes(found, table, _margin(ranges), shape)})
    first = next(iter(tuned.values()))
    result = RangeResult(
        op=operator.name, name=size_range.name, lo=size_range.lo, hi=size_range.hi,
        params=problem_at(operator, size_range, rest, size_range.lo).to_dict(),
        arch=first.target.arch, gpu=first.target.gpu, tolerance=ranges.tolerance,
        studies={s: r.study for s, r in sorted(tuned.items())}, buckets=tuple(found), probes=tuple(sorted(probed)),
        replayed=any(r.replayed for r in tuned.values()), trials=settings.trials, storage=settings.storage,
    )
    save(result)
    return result


def certify(
    result: RangeResult,
    *,
    settings: TuneSettings | None = None,
    heldout: int | Sequence[int] = 8,
    runner: str | RunnerFactory | None = None,
    measure: Callable[[int, dict[str, Any], dict[str, Any]], Regret] | None = None,
) -> RangeResult:
    """Certifies a tuned range on held-out sizes (``heldout``: how many, or which).

    Each held-out size is tuned like a range size (``settings.trials`` configurations, by
    default as many as each size of the range had; the dispatched configuration among the first), so its study holds both that size's best and
    the dispatched configuration measured at it. ``measure(size, dispatched_config,
    best_config)`` may replace the figures by its own timing (the GPU experiment times the
    exported run-time-M kernel itself beside the best kernel and ``torch.matmul``). The result,
    with the regrets, is saved again. Each held-out study is marked held out
    (:data:`~tilesearch.database.HELDOUT_ATTR`): no search transfers from it, this range's
    included when it is tuned again.
    """
    operator = registry.load(result.op)
    settings = settings or TuneSettings(strategy="xgb", trials=result.trials or TuneSettings.trials, progress=False)
    # a held-out size's best is a kernel compiled for exactly that size
    settings = replace(settings, storage=result.storage, study=None, runtime="")
    rest = {k: v for k, v in result.params.items() if k != result.name}
    size_range = result.size_range
    sizes = heldout if not isinstance(heldout, int) else bucketing.held_out(
        result.lo, result.hi, list(result.studies), heldout)
    regrets = []
    with _Stages(settings, runner) as stages:
        for size in sizes:
            index = bucketing.bucket_of(result.buckets, size)
            dispatched = result.buckets[index].config
            tuned = _tune_size(operator, size_range, rest, size, settings, stages, [dispatched])
            held = problem_at(operator, size_range, rest, size).key
            hold_out(settings.storage, operator.name, [held], result.key)
            if not tuned.best:
                regrets.append(Regret(size, index, None, None, note="no correct configuration"))
                continue
            if measure is not None:
                regrets.append(replace(measure(size, dispatched, tuned.best[0].config), size=size, bucket=index))
                continue
            record = _dispatched_record(operator, size_range, rest, size, settings, stages, tuned, dispatched)
            hold_out(settings.storage, operator.name, [held], result.key)  # the dispatched kernel's study too
            ok = record is not None and is_correct(record)
            note = "" if ok else (f"dispatched configuration {record.status}: {record.error}" if record
                                  else "not measured")
            regrets.append(Regret(
                size, index, record.latency_ms if ok else None, tuned.best[0].latency_ms,
                baseline_ms=(record.baseline_ms if ok else None) or tuned.best[0].baseline_ms, note=note,
            ))
    certified = replace(result, heldout=tuple(regrets))
    save(certified)
    return certified


def summary(regrets: Sequence[Regret]) -> dict[str, float | None]:
    """Median and largest regret, and the geometric mean of the ratio to the baseline."""
    import statistics

    values = sorted(r.regret for r in regrets if r.regret is not None)
    ratios = [r.vs_baseline for r in regrets if r.vs_baseline]
    return {
        "measured": len(values),
        "median_regret": statistics.median(values) if values else None,
        "max_regret": values[-1] if values else None,
        "geomean_vs_baseline": statistics.geometric_mean(ratios) if ratios else None,
    }


# --- storage: one record study per range ------------------------------------------------------

PREFIX = "range:"


def record_name(op: str, key: str, arch: str) -> str:
    return f"{PREFIX}{op}:{key}:{arch}"


def save(result: RangeResult) -> None:
    """Keeps ``result`` in its storage, in a study of its own that holds no trials."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=open_storage(result.storage), load_if_exists=True,
                                study_name=record_name(result.op, result.key, result.arch))
    study.set_user_attr("range_of", result.op)
    study.set_user_attr("range", json.dumps(result.to_dict()))  # params keep their order: it is the key's


def find(storage: str | None, op: str, key: str, arch: str | None = None) -> list[RangeResult]:
    """The tuned ranges of ``op`` with problem ``key`` (``m=1..16384,n=...``) in ``storage``."""
    found = []
    for summary_ in studies(open_storage(storage)):
        attrs = summary_.user_attrs
        if attrs.get("range_of") != op or "range" not in attrs:
            continue
        result = RangeResult.from_dict(json.loads(attrs["range"]), storage=storage)
        if result.key == key and (arch is None or capability(result.arch) == capability(arch)):
            found.append(result)
    return found


# --- helpers ----------------------------------------------------------------------------------


def _split(op, params, settings, ranges, overrides):
    operator = registry.load(op) if isinstance(op, str) else op
    raw = {**(params or {}), **overrides}
    setting_keys, range_keys = set(TuneSettings.keys()), set(RangeSettings.keys())
    settings = replace(settings or TuneSettings(strategy="xgb"), **{k: v for k, v in raw.items() if k in setting_keys})
    ranges = replace(ranges or RangeSettings(), **{k: v for k, v in raw.items() if k in range_keys})
    problem = {k: v for k, v in raw.items() if k not in setting_keys | range_keys}
    size_range, rest = parse(operator, problem)
    if size_range is None:
        from tilesearch.ranges import RangeError

        raise RangeError(f"no range among {', '.join(problem) or 'the parameters'}: give one as lo..hi, e.g. m=1..16384")
    range_key(operator, size_range, rest)  # the other parameters are checked here, before any tuning
    return operator, size_range, rest, replace(settings, study=None), ranges


def _modelled(operator: Operator, size_range: SizeRange, rest: Mapping[str, Any], table: Table,
              target: Any) -> bucketing.Shape:
    """A configuration's modelled time at a size, from the op's analytic model
    (:meth:`~tilesearch.op.Operator.estimate`): its FLOPs over its share of the peak. With a flat
    model (the default) that is the FLOPs alone, a straight line between two tuned sizes."""
    def shape(key: str, size: int) -> float:
        problem = problem_at(operator, size_range, rest, size)
        share = operator.estimate(problem.to_dict(), table.configs[key], target)
        return operator.flops(problem) / max(share, 1e-12)

    return shape


def _hold_out_certified(operator: Operator, size_range: SizeRange, rest: Mapping[str, Any],
                        storage: str | None) -> None:
    """Marks the held-out sizes of this range's earlier certifications in ``storage`` as held out
    (:func:`~tilesearch.database.hold_out`; :func:`certify` marks each of its sizes once tuned),
    so that a range tuned again learns nothing from the sizes that judge it. Storages certified
    before the mark existed get it here."""
    key = range_key(operator, size_range, rest)
    sizes = {r.size for earlier in find(storage, operator.name, key) for r in earlier.heldout}
    hold_out(storage, operator.name, [problem_at(operator, size_range, rest, s).key for s in sorted(sizes)], key)


def _geometric_middle(size_range: SizeRange) -> int:
    import math

    return min(max(math.isqrt(size_range.lo * size_range.hi), size_range.lo + 1), size_range.hi - 1)


class _Stages:
    """The runner and compile pool of each size's :func:`tune`: one GPU worker and one compile
    pool for all the sizes of a range, so their starts (TileLang's import, a CUDA context: about
    9 s on the H100) are paid once, not once per size and again per cross-measurement. They
    start with the first size that has something to measure: a size whose study is finished is
    served from the storage without them, as ``tune`` serves it (:mod:`tilesearch.served`). A
    runner factory (tests) gives each size a runner of its own. All are closed at the end."""

    def __init__(self, settings: TuneSettings, runner: str | RunnerFactory | None) -> None:
        self.factory = runner if callable(runner) else None
        self.settings = replace(settings, runner=runner) if isinstance(runner, str) else settings
        self.made: list[Runner | Builder] = []
        self.shared: tuple[Runner, Builder] | None = None

    def __call__(self, problem: Problem) -> tuple[Runner, Builder | None]:
        if self.factory is not None:
            self.made.append(self.factory(problem))
            return self.made[-1], None  # type: ignore[return-value]
        if self.shared is None:
            made = make_runner(self.settings)
            self.shared = (made, make_builder(self.settings, made))
            self.made += [self.shared[1], made]
        return self.shared

    def served(self, operator: Operator, problem: Problem, settings: TuneSettings) -> TuneResult | None:
        """The size's result if its study has nothing left to measure, without starting a worker."""
        if self.factory is not None or self.settings.runner != "local":
            return None
        return served.result(operator, problem, settings, served.probe())

    def __enter__(self) -> _Stages:
        return self

    def __exit__(self, *exc: object) -> None:
        close_stages(self.made)


def _tune_size(operator, size_range, rest, size, settings, stages, hints) -> TuneResult:
    """Tunes one size, the given configurations (other sizes' winners) first.

    A size is re-timed once, when its search ends; what the range measures there afterwards
    (other sizes' winners, :func:`_cross_measure`) are figures for its table, which compares
    search figures. So a size whose study an earlier run re-timed is not re-timed again for them,
    as a run that goes on would not: run again on a fresh H100 host, a range re-timed all 7 of
    its sizes, compiling each one's best anew, some 3 minutes before its first probe."""
    problem = problem_at(operator, size_range, rest, size)
    search = settings.search()
    if settings.hints:
        search = Hinted(search, settings.hints)
    start = time.perf_counter()
    log.info("%s=%d: tuning %d configurations", size_range.name, size, settings.trials)

    def searched(settings: TuneSettings) -> TuneResult:
        result = stages.served(operator, problem, settings)
        if result is None:
            runner, builder = stages(problem)
            # the op's hints (``hints=carver``) are in ``search`` already, after the range's own:
            # tune would put them ahead of everything it is given
            result = tune(operator, problem, settings=replace(settings, hints=""), strategy=Hinted(search, hints),
                          runner=runner, builder=builder)
        return result

    def retimed() -> list[str]:
        return find_studies(settings.storage, operator.name, problem, retimed=True, runtime=settings.runtime_params())

    if settings.retime and retimed():
        result = searched(replace(settings, retime=0))
        # re-timed all the same: a search that went on (more trials asked for), or another
        # GPU's study was the re-timed one
        if result.measured_now or result.study not in retimed():
            result = searched(settings)
    else:
        result = searched(settings)
    best = f"best {result.best[0].latency_ms:.4g} ms" if result.best else "no correct configuration"
    spent = phases.largest(result.phases)  # where a range's minutes go; nothing for a study served
    log.info("%s=%d: %s, %d measured now (%.0f s%s)", size_range.name, size, best, result.measured_now,
             time.perf_counter() - start, f": {spent}" if spent else "")
    return result


def _nearest_best(operator, size_range, rest, tuned: Mapping[int, TuneResult], size: int) -> list[dict[str, Any]]:
    """The hint of a size about to be tuned: the best of the tuned size nearest to it (in log
    size) among those whose best is valid at ``size``, or nothing. One configuration, as a
    held-out size gets one (the dispatched), so that the rest of its trials are its own search's.
    Every tuned size's winners are measured at every other tuned size anyway (:func:`_cross_measure`).
    Until ``7175d78`` every tuned size's best came first, so the fifth of seven sizes spent up to
    four of its eight trials on them; on the H100 (2026-11-27) none of a 14336x4096 range's seven
    searches measured the 128x256 tile that all three held-out searches at 784, 2657 and 8928 rows
    found, 13-15% ahead of the range's. The nearest best may be invalid here (a swapped tile of
    64 rows at 4096, where tiles are not swapped): then the next nearest serves, not no hint."""
    done = {s: r for s, r in tuned.items() if r.best}
    if not done:
        return []
    space = operator.space(problem_at(operator, size_range, rest, size), next(iter(done.values())).target)
    for near in sorted(done, key=lambda s: abs(math.log(s / size))):
        config = done[near].best[0].config
        if space.why_invalid(config) is None:
            return [config]
    return []


PLACED_ATTR = "range_sizes"
"""Record attribute: the sizes a range has tuned, in the order it placed them. A range run again
(resumed after a kill, or repeated) tunes these first, without deciding between them, and only
then places more. Each was placed from the figures of its time; placed again from later figures
(after :func:`_refine` had improved the searches), a resumed 4096x4096 range on the H100 tuned
173 rows where it had tuned 317, and it cross-measured every size's winners again between each
two sizes, 40-78 s each on a fresh host (compiling), so that a device call never got past the
sizes to certify (2026-11-27)."""


PROBED_ATTR = "range_probes"
"""Record attribute: the sizes each round of probes measured (:func:`_probe`), in order. A range
run again (resumed after a kill, or repeated) probes these, not sizes drawn again from a table
that later rounds' measurements have filled in."""


def _recorded(storage: str | None, name: str, attr: str = PLACED_ATTR) -> list[Any]:
    """What an earlier run of the range recorded in ``name``'s ``attr`` (:data:`PLACED_ATTR`,
    :data:`PROBED_ATTR`); empty if nothing."""
    try:
        study = optuna.load_study(storage=open_storage(storage), study_name=name)
    except KeyError:
        return []
    return list(study.user_attrs.get(attr, []))


def _note(storage: str | None, name: str, value: list[Any], attr: str = PLACED_ATTR) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=open_storage(storage), load_if_exists=True, study_name=name)
    if study.user_attrs.get(attr) != value:
        study.set_user_attr(attr, value)


REFINED_ATTR = "range_refined"
"""Study attribute: how many configurations :func:`_refine` added to a tuned size's search."""


def _refine(operator, size_range, rest, tuned, settings, stages, trials: int) -> bool:
    """Adds ``trials`` configurations to each tuned size's search, once (:data:`REFINED_ATTR`),
    without a final re-time; True if any were added. Each size was searched while the range knew
    only the sizes before it; now the strategy (``xgb``) learns from every tuned size. On the
    H100 (2026-11-26, ``c409cf2`` and ``fec9a73``) the held-out sizes' searches, 8 trials each but
    run after the range, found tiles that no tuned size's 8-trial search had measured, 7-15%
    faster than the configuration serving them, at 235 rows on two pairs and at 784 and 2657 on
    one: with the range's sizes and buckets right, these were its largest losses. (Not yet
    measured on a GPU with this step.)"""
    added = False
    for size, result in sorted(tuned.items()):
        db = TuningDatabase(settings.storage, result.study)
        if db.study.user_attrs.get(REFINED_ATTR, 0) >= trials:
            continue
        more = replace(settings, trials=db.planned() + trials, retime=0)
        tuned[size] = _tune_size(operator, size_range, rest, size, more, stages, [])
        db.study.set_user_attr(REFINED_ATTR, trials)
        added = True
    return added


def _dispatched_record(operator, size_range, rest, size, settings, stages, tuned, dispatched) -> Any:
    """The dispatched kernel's record at a held-out size: its configuration with the range's
    parameter a run-time value, as the artifact launches it, measured in a side study of the
    held-out one (one trial; the kernel is in TileLang's cache from the range). The side
    study's space keeps the knobs and drops the constraints: the op's space may prune the
    configuration at this size (split-K "not worth it" once the tiles fill the SMs), yet the
    run-time kernel runs it at every size of its bucket (it passed the shape-independent ones at
    its own size)."""
    key = config_key(dispatched)
    side = f"{tuned.study}/dispatched"

    def lookup() -> Any:
        try:
            db = TuningDatabase(settings.storage, side, read_only=True)
        except StorageError:  # not measured yet
            return None
        found = [r for r in db.finished().values() if config_key(r.config) == key]
        return found[0] if found else None

    record = lookup()
    if record is not None and has_result(record):
        return record
    problem = problem_at(operator, size_range, rest, size)
    knobs = operator.space(problem, tuned.target).knobs
    runner, builder = stages(problem)
    tune(operator, problem, settings=replace(settings, study=side, trials=1, hints="", retime=0,
                                             runtime=size_range.name),
         strategy=Hinted(None, [dispatched]), runner=runner, builder=builder, space=Space(knobs))
    return lookup()


CONTENDERS = 3
"""Besides its choice and its fastest figure, a tuned size's winners include up to this many more
of its configurations within :func:`_margin` of that figure."""


def _margin(ranges: RangeSettings) -> float:
    """The loss that places probes and admits contenders: the buckets' tolerance, but no finer
    than :data:`~tilesearch.buckets.RESOLVED`, what one search figure a size resolves."""
    return max(ranges.tolerance, bucketing.RESOLVED)


def _winners(tuned: Mapping[int, TuneResult], settings: TuneSettings, tolerance: float,
             dbs: Mapping[int, TuningDatabase] | None = None) -> dict[str, dict[str, Any]]:
    """Every tuned size's winners, by key: its study's choice, its fastest figure and its
    contenders (:data:`CONTENDERS`). Configurations that tie at one size part at others: on the
    H100 (2026-11-26, ``c409cf2``) a 256x128 tile was 2.8% behind the best at 1448 rows and 10%
    ahead of the range's configuration at 8928, where a held-out search found it; as no tuned
    size had it among its winners, no probe or other size measured it. ``dbs``: the sizes'
    studies, opened by the caller (:func:`_cross_measure`)."""
    winners: dict[str, dict[str, Any]] = {}
    for size, result in tuned.items():
        db = dbs[size] if dbs is not None else TuningDatabase(settings.storage, result.study)
        ranked = db.best(10**6)
        fastest = fastest_first(ranked)
        first = ranked[:1] + [r for _, r in fastest[:1]]
        close = [r for ms, r in fastest if ms <= fastest[0][0] * (1 + tolerance) and r not in first]
        for record in first + close[:CONTENDERS]:
            winners.setdefault(config_key(record.config), record.config)
    return winners


REFITS = 4
"""Configurations a probe times besides the tuned sizes' winners: the op's refits of the
configuration that serves the probed size (:meth:`~tilesearch.op.Operator.refits`)."""


PROBE_SEARCH = 4
"""Configurations a probe's own search proposes after the winners and refits: ``xgb`` by default,
which learns from the op's other studies in the storage, the range's tuned and probed sizes among
them (:meth:`~tilesearch.tuner.TuneSettings.search`).
On four H200s (2026-11-28, ``75dca45``) the two largest losses were to tiles that neither a
tuned size, a probe's winners nor its refits had measured, and that the held-out size's 8-trial
search, learning from the range's studies as this one does, found among its first proposals: at
235 rows of 4096x4096 a 128x64 tile with role-based warp specialization (12.3% ahead of the
128x128 split-K 2 tile serving 129..256 rows, found by its seventh proposal, 5% ahead by its
second); at 64 rows of 6144x4096 a swapped 32x128 tile without split-K, 96 blocks on 132 SMs,
so no refit (15% ahead of the serving tile compiled for 64 rows, its first proposal). The
probe's winners and refits come first, so the search proposes knowing how they did here."""


REFITTED_ATTR = "range_refits"
"""Record attribute: ``[size, refits]`` for each probed size, the refits it timed. A range run
again times these, not the refits of the configuration that serves the size then: later rounds'
measurements change the buckets, so new refits would win there and be cross-measured at every
tuned size on every rerun."""


def _refits(operator, problem, space, target, buckets, size, record) -> list[dict[str, Any]]:
    """The op's refits of the configuration that serves ``size``, as recorded for it, else now."""
    done = [[int(s), found] for s, found in _recorded(*record, REFITTED_ATTR)]
    for s, found in done:
        if s == size:
            return [dict(c) for c in found if space.why_invalid(c) is None]
    found = operator.refits(problem, space, target, buckets[bucketing.bucket_of(buckets, size)].config, REFITS)
    _note(*record, sorted([*done, [size, found]], key=lambda entry: entry[0]), REFITTED_ATTR)
    return found


def _probe(operator, size_range, rest, tuned, settings, stages, sizes: Sequence[int],
           tolerance: float, buckets: Sequence[Bucket], record: tuple[str | None, str]) -> dict[int, TuneResult]:
    """Times every tuned size's winners at ``sizes`` (:func:`~tilesearch.buckets.probe_sizes`),
    one study a size whose trials are those configurations, then :data:`PROBE_SEARCH` of its own
    search's. So a probe costs the winners' compiles and timings and a short search, not a full
    one. The buckets' edges then follow
    measurements, not the model alone: between 128 and 9,000 rows the winner changes with how
    the tiles fill the 132 SMs, and on the H100 a range with 7 tuned sizes lost 11-38% at
    held-out sizes there (2026-11-26). A short search at each probe (3 configurations from
    ``xgb`` after the winners) was tried on a 14336x4096 range (H100, 2026-11-27, ``b293798``):
    the 128x256 tile that held-out searches found 15% ahead at 784 and 2657 rows was still
    measured at no size of the range, so it was taken out again. Since then a probe also times
    the op's refits of the configuration that serves it (:data:`REFITS`): on an H200
    (2026-11-27, ``f917264``) the held-out sizes that still lost 15-31% lost to tiles whose blocks
    fill one wave of the SMs there and not at the tuned sizes around them; since ``PROBE_SEARCH``,
    a few configurations of a search that learns from every size measured so far."""
    winners = list(_winners(tuned, settings, tolerance).values())
    target = next(iter(tuned.values())).target
    out = {}
    for size in sorted(set(sizes) - set(tuned)):
        problem = problem_at(operator, size_range, rest, size)
        space = operator.space(problem, target)
        valid = [c for c in winners if space.why_invalid(c) is None]
        seen = {config_key(c) for c in valid}  # and what may fill the GPU here where their tiles do not
        valid += [c for c in _refits(operator, problem, space, target, buckets, size, record) if config_key(c) not in seen]
        # the search's figures are what the table compares at every size; a final re-time (two
        # fresh processes, some 6 s on the H100) would add nothing to them
        probe = replace(settings, trials=len(valid) + PROBE_SEARCH, retime=0)
        result = stages.served(operator, problem, probe)
        if result is None:
            runner, builder = stages(problem)
            # the op's hints would take the probe's few searched trials: not at a probe
            result = tune(operator, problem, settings=replace(probe, hints=""), strategy=Hinted(settings.search(), valid),
                          runner=runner, builder=builder)
        if result.best:
            out[size] = result
            spent = phases.largest(result.phases) or "served from the storage"
            log.info("%s=%d: probed the tuned sizes' winners, %d refits and %d searched, best %.4g ms (%s)",
                     size_range.name, size, len(valid) - len(seen), PROBE_SEARCH, result.best[0].latency_ms, spent)
    return out


def _cross_measure(operator, size_range, rest, tuned, settings, stages, tolerance: float) -> Table:
    """Measures every tuned size's winners at every other tuned size; returns the table. A size
    has two winners where they differ: its study's choice, and its fastest figure in the search,
    which :func:`~tilesearch.buckets.cover` may pick since it compares the figures. Before the
    second was measured too, the 430-row configuration that served a 4096x4096 range up to 789
    rows (H100) had no figure at 1448, and the edge fell back to the geometric mean. The added
    trials get no final re-time: the table compares search figures, each at the clock of a full
    timing (:func:`~tilesearch.records.comparable_ms`), and with sizes placed one a
    round, re-timing every tuned size after every round took 74-180 s a round on the H100. A
    rerun of the range does not re-time them either (:func:`_tune_size`).

    Each size's study is opened once, on one storage, and read again only where winners were
    measured: opened anew for the winners, for what the size measured and for its row, the studies'
    reads took 13 of a served rerun's 22 s under the profiler (1..512, 13 sizes, 2026-12-03)."""
    storage = open_storage(settings.storage)
    dbs = {size: TuningDatabase(storage, result.study) for size, result in tuned.items()}
    winners = _winners(tuned, settings, tolerance, dbs)
    table = Table()
    for size, result in sorted(tuned.items()):
        db = dbs[size]
        measured = {config_key(r.config) for r in db.finished().values()}
        problem = problem_at(operator, size_range, rest, size)
        space = operator.space(problem, result.target)
        # a winner the op's space prunes at this size (split-K once the tiles fill the SMs) is
        # not proposed there, so it would stay missing and be asked for again on every rerun
        missing = [c for k, c in winners.items() if k not in measured and space.why_invalid(c) is None]
        if missing:
            # said per size: after a round of 8 probes on an H200 this measured for 2 minutes
            # without a line in the log (2026-11-28)
            start = time.perf_counter()
            runner, builder = stages(problem)
            tune(operator, problem, settings=replace(settings, trials=db.planned() + len(missing), retime=0, hints=""),
                 strategy=Hinted(None, missing), runner=runner, builder=builder)
            log.info("%s=%d: measured %d other sizes' winners (%.0f s)", size_range.name, size, len(missing),
                     time.perf_counter() - start)
            db = TuningDatabase(storage, result.study)  # with what tune measured
        row = {}
        records = db.best(10**6)
        for record, ms in zip(records, comparable_ms(records)):
            if ms is None:
                continue
            key = config_key(record.config)
            row.setdefault(key, ms)
            table.configs.setdefault(key, record.config)
        if row:
            table.latency[size] = row
    return table
