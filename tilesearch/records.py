"""Typed records passed between the pipeline's stages.

strategy -> :class:`Candidate` -> builder -> :class:`BuildResult` -> runner -> :class:`RunResult`
-> database. Failures are records with a status and an error text, never exceptions crossing the
tuning loop.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
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


@dataclass(frozen=True)
class RunResult:
    """What a runner measured for one candidate.

    ``latency_ms`` is the median kernel time; ``baseline_ms`` the median time of the op's
    baseline timed beside it in the same worker; ``speedup`` is ``baseline_ms / latency_ms``.
    """

    status: Status
    error: str | None = None
    latency_ms: float | None = None
    tflops: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    rel_err: float | None = None
    max_err: float | None = None
    measure_s: float = 0.0
    replayed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data
