"""One shutdown path for SIGINT and SIGTERM.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to be.
Raised inside a finalizer (a ``WeakKeyDictionary`` callback, a ``__del__``) it is printed as
"Exception ignored" and swallowed, and the run would go on and exit 0. So the handler here also
*remembers* the signal: :func:`check` raises it again at the tuning loop's next step, and
:func:`exit_code` makes the process exit ``128 + signal`` (130, 143) whatever happened to the
exception. Only the first signal raises; later ones are remembered but do not interrupt the
cleanup that the first one started (marking the trials in flight as interrupted), which keeps
the study resumable. SIGKILL remains the way to stop a stuck cleanup; the next run clears what
it leaves (see ``TuningDatabase.fail_stale``).

A signal must not cut a storage call in two. Raised inside SQLAlchemy, a ``KeyboardInterrupt``
leaves its session half-way through a state change (``IllegalStateChangeError``, a failed
``assert self.is_active``, SIGTERMs injected at each line of one trial's creation showed
both), and in CI a study was left that no later run could open ("Multiple rows were found"
for one trial number). So storage calls run :func:`held`: the first signal that arrives inside
one is raised as soon as the call returns (milliseconds; a call waiting on another process's
lock waits at most its timeout). A second signal meanwhile raises at once: the user insists; but
not one that comes within :data:`DUPLICATE_S` of the first, which is the same request again.

Where :func:`install` has not run (``tune`` or ``tune_range`` called from Python, an experiment
script), a storage call still runs whole under SIGINT: :func:`held` lends the process a handler
for the call's length where Python's own is in place, and raises Python's ``KeyboardInterrupt``
when the call returns; after it, nothing of the signal is kept, so the next ``tune`` of that
process runs as usual. On an H200 a range run from ``experiments/deploy_check.py``, stopped by
``timeout -s INT``, took the interrupt inside SQLAlchemy's statement compiling, half-way through
a trial's creation (2026-11-29); SQLite rolled the transaction back, but the session was left
mid-change, as in CI above. A SIGTERM there keeps its default, to end the process at once,
which a transaction survives.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
DUPLICATE_S = 0.5
"""A signal this soon after the first is the first delivered again, not a user who insists: GNU
``timeout`` sends its signal to the command and then to the command's process group, and a busy
process of many threads can take both. On an H200 (2026-11-29) one ``timeout -s INT`` raised two
``KeyboardInterrupt`` in a range's process, the second while the first unwound a storage call.
A person pressing Ctrl-C again waits longer than this, and a held call takes milliseconds."""
_first_at = 0.0  # when the first signal came (time.monotonic)
_received: list[int] = []
_raised = False  # whether the handler or a held section's end has raised the first signal
_holding = 0  # how many held sections the main thread is inside
_deferred_at: float | None = None  # when a SIGINT came inside a held section under a lent handler


class Interrupted(KeyboardInterrupt):
    """The process got SIGINT or SIGTERM; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install() -> None:
    """Routes SIGINT and SIGTERM of this (main) thread through :func:`_handle`. A SIGINT that the
    parent set to be ignored (a shell's background job, ``nohup``) stays ignored, as Python does.
    An :class:`Interrupted` swallowed in a finalizer is not printed as "Exception ignored": it
    is remembered, and :func:`check` raises it again."""
    for signum in SIGNALS:
        if signum == signal.SIGINT and signal.getsignal(signum) is signal.SIG_IGN:
            continue
        signal.signal(signum, _handle)
    sys.unraisablehook = _quiet_when_interrupted


def _quiet_when_interrupted(unraisable: Any) -> None:
    if not isinstance(unraisable.exc_value, Interrupted):
        sys.__unraisablehook__(unraisable)


def _repeat(first: float | None) -> bool:
    """Whether a signal now is the one that came at ``first`` delivered again (:data:`DUPLICATE_S`)."""
    return first is not None and time.monotonic() - first < DUPLICATE_S


def _handle(signum: int, frame: object) -> None:
    global _first_at
    if _received and _repeat(_first_at):
        return  # the first one again
    if not _received:
        _first_at = time.monotonic()
    _received.append(signum)
    if _raised or (_holding and len(_received) == 1):
        return  # a cleanup is under way, or a held section raises it when it ends
    _raise()


def _raise() -> None:
    global _raised
    _raised = True
    raise Interrupted(_received[0])


@contextmanager
def held() -> Iterator[None]:
    """Runs its body whole: a first signal arriving inside is raised when it ends (see the module
    docstring). Only the main thread runs signal handlers; in other threads this does nothing."""
    global _holding, _deferred_at
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    lent = not _holding and _lend()
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
        if lent:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            pending, _deferred_at = _deferred_at is not None, None
            if pending:
                raise KeyboardInterrupt  # where Python would have raised it, had the call been one step
    if not _holding and _received and not _raised:
        _raise()


def _lend() -> bool:
    """Whether Python's own SIGINT handler is in place, now replaced by :func:`_defer` for one held section."""
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False  # install()'s, the user's, or ignored: theirs stays
        signal.signal(signal.SIGINT, _defer)
    except ValueError:  # not the main interpreter
        return False
    return True


def _defer(signum: int, frame: object) -> None:
    global _deferred_at
    if _deferred_at is None:
        _deferred_at = time.monotonic()
    elif not _repeat(_deferred_at):
        raise KeyboardInterrupt  # a second one: the user insists


def received() -> int | None:
    """The first signal received, if any."""
    return _received[0] if _received else None


def check() -> None:
    """Raises :class:`Interrupted` if a signal arrived, even one whose exception was swallowed."""
    if _received:
        raise Interrupted(_received[0])


def exit_code(signum: int | None = None) -> int:
    """``128 + signal``: 130 for SIGINT, 143 for SIGTERM (the shell's convention)."""
    return 128 + (signum or received() or signal.SIGINT)
