"""Typed records passed between the pipeline's stages.

strategy -> :class:`Candidate` -> builder -> :class:`BuildResult` -> runner -> :class:`RunResult`
-> database. Failures are records with a status and an error text, never exceptions crossing the
tuning loop.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tilesearch.space import Config, digest
from tilesearch.target import Target


class Status(str, enum.Enum):
    """Outcome of one configuration."""

    OK = "ok"
    INVALID = "invalid"  # pruned by a constraint before compiling
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    RUNTIME_ERROR = "runtime_error"  # raised, crashed the CUDA context or the runner's worker process
    RUN_TIMEOUT = "run_timeout"  # hung: the runner's worker process was killed and restarted
    WRONG_RESULT = "wrong_result"
    INTERRUPTED = "interrupted"  # the tuning process stopped before the trial finished
    NOT_RECORDED = "not_recorded"  # a replay runner's dataset has no measurement of it
    SKIPPED = "skipped"  # not measured: a copy of a configuration measured or in flight, or a yield to the budget


@dataclass(frozen=True)
class Candidate:
    """One configuration of one problem, ready to build and run.

    Attributes:
        op: operator name.
        problem: the problem's parameters.
        config: knob values.
        target: what to compile for.
        op_ref: where workers load the operator from: its registered name or an import path
            ``"module:attr"`` (see :func:`tilesearch.registry.load`); defaults to ``op``.
        runtime: problem parameters compiled as run-time values (see
            :attr:`~tilesearch.op.Operator.runtime_params`): an exported range's kernels.
    """

    op: str
    problem: dict[str, Any]
    config: Config
    target: Target
    op_ref: str = ""
    runtime: tuple[str, ...] = ()

    def load_op(self) -> Any:
        from tilesearch import registry

        return registry.load(self.op_ref or self.op)

    def build(self, op: Any = None) -> Any:
        """Compiles the candidate with its operator (``op``, else loaded from ``op_ref``)."""
        from tilesearch.builder import compiler, frontend, library
        from tilesearch.op import Problem

        compiler.install()
        library.install()
        frontend.install()
        op = op or self.load_op()
        extra = {"runtime": self.runtime} if self.runtime else {}
        return op.build(Problem(op.name, self.problem), self.config, self.target, **extra)

    @property
    def key(self) -> str:
        """Content hash of everything that changes the result except software versions."""
        runtime = [list(self.runtime)] if self.runtime else []  # keys of static kernels unchanged
        return digest(self.op, self.problem, self.config, self.target.arch, *runtime)


@dataclass(frozen=True)
class BuildResult:
    candidate: Candidate
    ok: bool
    error: str | None = None
    compile_s: float = 0.0
    timed_out: bool = False
    tools_s: float = 0.0  # of compile_s, in compiler processes (nvcc, the host compiler)


@dataclass(frozen=True, kw_only=True)
class Figures:
    """The measured figures of one configuration, declared once: a runner's :class:`RunResult`
    and the database's :class:`~tilesearch.database.TrialRecord` both carry them.

    ``latency_ms`` is the median kernel time over ``runs`` timed runs, ``latency_q1`` and
    ``latency_q3`` its quartiles, ``latency_low``/``latency_high`` the 95% interval of the median;
    ``baseline_ms`` the median time of the op's baseline timed interleaved with it in the same
    worker process; ``speedup`` is ``baseline_ms / latency_ms`` and ``speedup_low``/``speedup_high`` its 95%
    interval from a paired bootstrap over the interleaved rounds (:mod:`tilesearch.runner.stats`).
    ``sm_clock_mhz`` (lowest), ``temp_c`` and ``power_w`` (highest) are NVML's readings while the
    rounds ran; ``throttled`` says the clock sat well below its usual level even after a second try.
    A figure not taken is ``None``: replayed results have no interval unless their dataset recorded
    one, and records written before these figures existed read back as ``None``.
    """

    latency_ms: float | None = None
    tflops: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    rel_err: float | None = None
    max_err: float | None = None
    latency_q1: float | None = None
    latency_q3: float | None = None
    latency_low: float | None = None
    latency_high: float | None = None
    runs: int | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    throttled: bool | None = None


@dataclass(frozen=True)
class RunResult(Figures):
    """What a runner measured for one candidate: its status, the error if it failed, and its
    :class:`Figures`."""

    status: Status
    error: str | None = None
    measure_s: float = 0.0
    replayed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


FIGURES: tuple[str, ...] = tuple(f.name for f in fields(Figures))


def figures(source: Any, names: tuple[str, ...] = FIGURES) -> dict[str, Any]:
    """The figures ``names`` (default: all of :class:`Figures`) of any record that carries them
    (``None`` where it has none): how a dataset row or an artifact's metadata takes its figures
    from a trial's record, by the one declaration."""
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"{unknown} are not figures of tilesearch.records.Figures")
    return {name: getattr(source, name, None) for name in names}


# Statuses that say something about the configuration itself: what happened when it was built and run.
RESULTS = frozenset(s.value for s in (Status.OK, Status.COMPILE_ERROR, Status.COMPILE_TIMEOUT,
                                      Status.RUNTIME_ERROR, Status.RUN_TIMEOUT, Status.WRONG_RESULT))
# Statuses that settle a configuration without a result: trying it again in the same study would
# tell nothing new (its constraint rejects it again; the replayed dataset still has no row for it).
SETTLED_WITHOUT_RESULT = frozenset((Status.INVALID.value, Status.NOT_RECORDED.value))


def _status(record: Any) -> str:
    status = record.status
    return status.value if isinstance(status, Status) else str(status)


def has_result(record: Any) -> bool:
    """Whether ``record`` (a :class:`RunResult`, a database ``TrialRecord`` or a dataset ``Row``)
    holds a result: the one rule that the database (its trial budget and best), the claims, the
    cost-model strategies, the datasets and the artifacts all use.

    A result is what building and running *this configuration* did: measured correct (``ok``), or
    failed because of the configuration (``compile_error``, ``compile_timeout``,
    ``runtime_error``, ``run_timeout``, ``wrong_result``). A failure is a result: it is a fact of
    the configuration, it spends a trial of the budget, a cost model learns from it (as the worst
    kind of configuration) and it is never measured again. A **wrong result** is therefore a
    result, but not a correct one (:func:`is_correct`).

    Not results, because they say nothing about the configuration:

    - a **duplicate** (``duplicate_of`` set: a copy of another trial's configuration) and a
      **yield/skip** (``skipped``: a repeat, or a yield to another tuning process or to the budget):
      the result, if any, is the other trial's; counting the copy would count one measurement twice;
    - an **interrupted** trial (and ``running``/``waiting``, and ``unknown``, a finished trial that
      tilesearch did not write): it ended, or has not yet ended, before its outcome was known; the
      configuration is free to be measured again;
    - a **pruned-invalid** trial (``invalid``): a constraint rejected it before compiling, so
      nothing was built or run; it costs no trial of the budget and teaches no cost model. It is
      settled, though (:func:`is_settled`): the constraint would reject it again;
    - ``not_recorded``: a replay dataset has no row for it; nothing is known, and asking the same
      dataset again would tell nothing more (settled, like ``invalid``). It costs no trial of the
      budget, so a replayed search over a dataset with gaps gets as many results as one on the GPU.
    """
    return getattr(record, "duplicate_of", None) is None and _status(record) in RESULTS


def is_settled(record: Any) -> bool:
    """Whether ``record`` settles its configuration in its study, so that no strategy proposes it
    again and a resumed run does not retry it: it has a result (:func:`has_result`), or it was
    pruned as invalid or not recorded in a replay dataset (see :func:`has_result` for why)."""
    return has_result(record) or (
        getattr(record, "duplicate_of", None) is None and _status(record) in SETTLED_WITHOUT_RESULT
    )


def is_correct(record: Any) -> bool:
    """Whether ``record`` is a result measured correct, with a latency: a candidate for the best."""
    return has_result(record) and _status(record) == Status.OK.value and record.latency_ms is not None


def speeds(records: Sequence[Any]) -> list[float | None]:
    """One figure per record by which the correct records of one problem are ranked, higher is
    faster (``None`` for a record that is not correct, :func:`is_correct`): TFLOP/s (else
    ``1 / latency_ms``), or the ratio to the baseline once any of them was raced and every one
    has a ratio.

    A search trial raced after a short look (:mod:`tilesearch.runner.measure`) is often timed at
    the boost clock the GPU holds for its first tens of milliseconds of load, so its latency does
    not compare with a trial timed for 200 ms and more; its ratio does, since the baseline ran in
    the same rounds and the clock cancels in it. On the H100 raced trials of a 2048x14336x4096
    GEMM had the study's lowest latencies (0.344 ms at a ratio of 0.893, where the trial of the
    best ratio, 0.951, took 0.364 ms), and ranked by latency they filled the final re-time, which then chose a kernel at 0.906x
    torch.matmul where the other search of the shape found 0.961x. Without raced records the
    latency stays the figure: the replay datasets' baselines add their own noise to a ratio, and
    ``xgb`` learning ratios instead of TFLOP/s needed up to 18 trials to 97% of a dataset's best
    where it needs 10."""
    ratios = _by_ratio(records)
    out: list[float | None] = []
    for r in records:
        if not is_correct(r):
            out.append(None)
        elif ratios:
            out.append(r.speedup)
        else:
            out.append(r.tflops if getattr(r, "tflops", None) else 1.0 / r.latency_ms)
    return out


def comparable_ms(records: Sequence[Any]) -> list[float | None]:
    """One latency per record of one problem that compares across the records, as :func:`speeds`
    ranks them (``None`` for a record that is not correct): where they rank by the ratio to the
    baseline, the baseline's median time in the records that were not raced, over each record's
    ratio (every figure at the clock of a full timing); else ``latency_ms``.

    A range's table compares its figures at one size and draws them between sizes, so it needs
    milliseconds at one clock. On an H200 (2026-11-27, ``f917264``) the 8932-row search of a
    14336x4096 range timed raced trials beside a baseline of 1.27-1.29 ms and full ones beside
    1.46 ms: by latency a persistent 256x128 tile was 4% ahead of a 128x256 one and served
    5633..11008 rows, by ratio it was 9% behind, and at 8928 rows, timed side by side, the
    dispatched tile lost 9.6% to the per-size search's 128x256."""
    correct = [r for r in records if is_correct(r)]
    if not _by_ratio(records):
        return [r.latency_ms if is_correct(r) else None for r in records]
    full = [r.baseline_ms for r in correct if r.baseline_ms and not _raced(r)]
    base = sorted(full or [r.baseline_ms for r in correct if r.baseline_ms])
    reference = base[len(base) // 2]
    return [reference / r.speedup if is_correct(r) else None for r in records]


def fastest_first(records: Sequence[Any]) -> list[tuple[float, Any]]:
    """``(figure, record)`` for the correct records, fastest first by :func:`comparable_ms`."""
    figures = [(ms, r) for r, ms in zip(records, comparable_ms(records)) if ms is not None]
    return sorted(figures, key=lambda pair: pair[0])


def _raced(record: Any) -> bool:
    return bool((getattr(record, "attrs", None) or getattr(record, "extra", None) or {}).get("raced"))


def _by_ratio(records: Sequence[Any]) -> bool:
    """Whether one problem's records compare by their ratio to the baseline (:func:`speeds`)."""
    correct = [r for r in records if is_correct(r)]
    return any(_raced(r) for r in correct) and all(getattr(r, "speedup", None) for r in correct)


@dataclass(frozen=True)
class Incumbent:
    """The best correct trial of a search so far, which a runner may race a search trial against
    (:func:`tilesearch.runner.measure.racer`): a trial clearly slower than it need not be timed to
    the full precision.

    ``speedup`` is the highest lower bound of a correct trial's ratio to the baseline (its ratio
    where it has no interval), ``latency_ms`` the lowest upper bound of a correct trial's latency
    (its median where it has no interval): the bounds, not the medians, so that a race is decided
    against what the best is at least. The tuning loop hands one to the runner with each
    candidate; it is not part of the :class:`Candidate` and of no key, so which configurations
    are claimed, measured and resumed does not depend on it.
    """

    speedup: float | None = None
    latency_ms: float | None = None

    def updated(self, record: Any) -> Incumbent:
        """The incumbent once ``record`` (a :class:`RunResult` or a database record) is known."""
        if not is_correct(record):
            return self
        speedup = record.speedup_low if record.speedup_low is not None else record.speedup
        latency = record.latency_high if record.latency_high is not None else record.latency_ms
        return Incumbent(
            speedup=max((v for v in (self.speedup, speedup) if v is not None), default=None),
            latency_ms=min((v for v in (self.latency_ms, latency) if v is not None), default=None),
        )


@dataclass(frozen=True)
class Retimed:
    """One configuration of the final re-time: its trial in the study and what was measured."""

    trial: int
    config: Config
    result: RunResult

    def to_dict(self) -> dict[str, Any]:
        return {"trial": self.trial, "config": self.config, "result": self.result.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Retimed:
        result = dict(data["result"])
        result["status"] = Status(result["status"])
        known = {f.name for f in fields(RunResult)}
        return cls(int(data["trial"]), dict(data["config"]), RunResult(**{k: v for k, v in result.items() if k in known}))


@dataclass(frozen=True)
class Final:
    """The choice at the end of a tuning run (see :mod:`tilesearch.runner.retime`).

    Attributes:
        entries: the re-timed configurations, the chosen one first, then by speed.
        ties: trials whose interval overlaps the chosen one's (the chosen included).
        basis: what the intervals compare: ``speedup`` (ratio to the baseline), ``latency``
            (medians, without a baseline) or ``none`` (no intervals: replayed figures).
        together: whether the entries were timed interleaved in the same rounds, in each fresh
            worker process of the re-time (their rounds pooled: :mod:`tilesearch.runner.pool`);
            ``False`` when each was measured (or served from a dataset) alone.
        replayed: the figures come from a dataset or a test runner, not a GPU.
    """

    entries: tuple[Retimed, ...]
    ties: tuple[int, ...]
    basis: str
    together: bool
    replayed: bool

    @property
    def chosen(self) -> Retimed | None:
        return self.entries[0] if self.entries and self.entries[0].result.status == Status.OK else None

    def to_dict(self) -> dict[str, Any]:
        return {"entries": [e.to_dict() for e in self.entries], "ties": list(self.ties), "basis": self.basis,
                "together": self.together, "replayed": self.replayed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Final:
        return cls(tuple(Retimed.from_dict(e) for e in data["entries"]), tuple(data["ties"]), data["basis"],
                   bool(data["together"]), bool(data["replayed"]))
