"""Typed records passed between the pipeline's stages.

strategy -> :class:`Candidate` -> builder -> :class:`BuildResult` -> runner -> :class:`RunResult`
-> database. Failures are records with a status and an error text, never exceptions crossing the
tuning loop.
"""

from __future__ import annotations

import enum
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
    RUNTIME_ERROR = "runtime_error"  # raised, crashed the CUDA context or the worker
    RUN_TIMEOUT = "run_timeout"  # hung: the worker was killed and restarted
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
    """

    op: str
    problem: dict[str, Any]
    config: Config
    target: Target
    op_ref: str = ""

    def load_op(self) -> Any:
        from tilesearch import registry

        return registry.load(self.op_ref or self.op)

    @property
    def key(self) -> str:
        """Content hash of everything that changes the result except software versions."""
        return digest(self.op, self.problem, self.config, self.target.arch)


@dataclass(frozen=True)
class BuildResult:
    candidate: Candidate
    ok: bool
    error: str | None = None
    compile_s: float = 0.0
    timed_out: bool = False


@dataclass(frozen=True, kw_only=True)
class Figures:
    """The measured figures of one configuration, declared once: a runner's :class:`RunResult`
    and the database's :class:`~tilesearch.database.TrialRecord` both carry them.

    ``latency_ms`` is the median kernel time over ``runs`` timed runs, ``latency_q1`` and
    ``latency_q3`` its quartiles, ``latency_low``/``latency_high`` the 95% interval of the median;
    ``baseline_ms`` the median time of the op's baseline timed interleaved with it in the same
    worker; ``speedup`` is ``baseline_ms / latency_ms`` and ``speedup_low``/``speedup_high`` its 95%
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
        together: whether the entries were timed interleaved in the same rounds of one fresh
            worker; ``False`` when each was measured (or served from a dataset) alone.
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
