"""Peers: kernels of other tools timed beside ours in the final re-time.

A comparison is fair only inside one process and one clock: a peer's figure taken in another
process, minutes apart, differs from ours by as much as the gaps we want to read. So a peer is
not a number brought in from elsewhere but a *maker* that the re-time calls in its own worker,
beside the candidates' kernels: ``make(op, problem, inputs, target, **options)`` returns a
no-argument callable that computes the op's outputs from ``inputs`` (and returns them, a tensor
or a tuple). The re-time checks what it returns against the reference and times it interleaved
in the same rounds as the candidates and the baseline.

A :class:`Peer` names its maker by import path (``"module:function"``) because it crosses into
the worker process; its library (Triton, TileLang's autotuner) is imported there, lazily, so a
machine without it still loads this module. A peer that cannot be made or fails its check comes
back as a result with that status and the error, like any candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilesearch.records import RunResult, Status


@dataclass(frozen=True)
class Peer:
    """One peer of a re-time.

    Attributes:
        name: what tables and plots call it (``torch.matmul``, ``triton autotune``).
        maker: import path of its maker, ``"module:function"``.
        options: keyword arguments of the maker (a configuration list, say); plain data.
        checked: compare its outputs with the reference; ``False`` for a yardstick that does
            not compute the op (a copy of the output's bytes: the floor of writing it).
        gated: a checked peer outside the op's tolerance is refused (``wrong_result``, not
            timed); ``False`` for the op's own PyTorch expression, the yardstick every speedup
            is taken against whatever its precision: einsum-sum's rounds S to bfloat16, 100x the
            error the plugin allows its float32 kernels, and was left untimed. Its errors are
            reported beside its time either way.
    """

    name: str
    maker: str
    options: dict[str, Any] = field(default_factory=dict)
    checked: bool = True
    gated: bool = True

    def make(self, op: Any, problem: Any, inputs: Any, target: Any) -> Any:
        """The peer's no-argument callable (called inside the measuring worker)."""
        from tilesearch.workers import resolve

        return resolve(self.maker)(op, problem, inputs, target, **self.options)


def untimed(peers: Sequence[Peer], why: str, status: Status = Status.NOT_RECORDED) -> list[RunResult]:
    """Results for ``peers`` that a runner could not time (a dataset holds no peer's figures)."""
    return [RunResult(status, error=why, replayed=status == Status.NOT_RECORDED, extra={"peer": p.name})
            for p in peers]
