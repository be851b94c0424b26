"""Isolated worker processes: a call that crashes, hangs or leaks takes down only its worker process.

Both the builder (its *compile pool*: several worker processes, compiling) and the runner (one
worker process on its GPU, measuring) use :class:`IsolatedWorker`. A call names a top-level
function by import path, so nothing but plain data crosses the pipe.

Words, one per concept (the README's "Words" says the same for users):

- **worker process**: a child process of :class:`IsolatedWorker`, started by a builder or a
  runner; only it is called a worker in the code;
- **compile pool**: a builder's worker processes (``build_workers`` of them, ``builder.workers``);
- **tuning process**: a process that runs the tuning loop (:func:`tilesearch.tuner.tune`) on a
  study; several may share one (:mod:`tilesearch.distributed`, :mod:`tilesearch.claim`).

The command ``tilesearch worker`` and the setting ``workers=N`` start tuning processes; they keep
the names they had before these words were fixed, because users' commands and scripts call them.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

_CTX = mp.get_context("spawn")


@dataclass(frozen=True)
class CallResult:
    """Outcome of one call: ``ok`` with ``value``, or an ``error`` text; ``timed_out`` or
    ``died`` when the worker had to be killed or exited by itself."""

    ok: bool
    value: Any = None
    error: str | None = None
    timed_out: bool = False
    died: bool = False


def resolve(path: str) -> Any:
    """The top-level function (or other attribute) an import path ``module:name`` names."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _exit() -> None:
    """Ends the worker process once its parent asks, or is gone: the exit handlers run (whatever a
    library registered to clean up), then the process exits without Python's teardown of every
    module. With torch and TileLang loaded that teardown took 0.4 s a process on the CPU machine,
    against 0.02 s this way, and ``tune`` waits for its processes to exit (``stop workers``,
    1.0-1.9 s of README's main command on the H100). A worker holds nothing that needs it: each
    call is over, its result sent and its files written before the next message is read."""
    import atexit
    import sys

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def _serve(conn: Any, env: dict[str, str], nice: int = 0) -> None:
    if nice:
        os.nice(nice)  # the compiler processes it starts inherit it
    # Ctrl-C reaches the whole process group; the parent stops its workers itself (tilesearch.shutdown),
    # so a worker must not die of it mid-call, printing a traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(env)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            _exit()
        if message is None:
            _exit()
        path, args, kwargs = message
        try:
            value = resolve(path)(*args, **kwargs)
            reply = ("ok", value)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back as data
            reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
        try:
            conn.send(reply)
        except Exception as exc:  # the value did not pickle
            conn.send(("error", f"result of {path} could not be sent back: {exc}"))


class WorkerClosedError(RuntimeError):
    """A call on a worker after :meth:`IsolatedWorker.close`."""


class IsolatedWorker:
    """A child process, started with ``spawn``, that runs one call at a time.

    Args:
        env: environment variables set in the child before any call (e.g. ``CUDA_VISIBLE_DEVICES``).
        name: shown in error texts.
        nice: added to the child's niceness (lower CPU priority) before any call.
    """

    def __init__(self, env: dict[str, str] | None = None, name: str = "worker", nice: int = 0) -> None:
        self.env = dict(env or {})
        self.name = name
        self.nice = nice
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0
        # start and stop may run in different threads: a compile pool closed while a thread is
        # still starting a worker process found that process half-started ("can only join a
        # started process"), and the error replaced the one that had made tune stop
        self._lock = threading.RLock()
        self._closed = False

    def start(self) -> None:
        with self._lock:
            if self._closed:
                raise WorkerClosedError(f"{self.name} is closed")
            if self._proc is not None and self._proc.is_alive():
                return
            parent, child = _CTX.Pipe()
            self._proc = _CTX.Process(target=_serve, args=(child, self.env, self.nice), daemon=True, name=self.name)
            self._proc.start()
            child.close()
            self._conn = parent

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        """Whether the child process is running (a call would not have to start it)."""
        with self._lock:
            return self._proc is not None and self._proc.is_alive()

    def call(self, path: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> CallResult:
        """Runs ``path(*args, **kwargs)`` in the child; kills and restarts it after ``timeout`` s."""
        with self._lock:
            self.start()
            conn, proc = self._conn, self._proc  # another thread's stop may clear them
        try:
            conn.send((path, args, kwargs))
            if not conn.poll(timeout):
                self.restart()
                return CallResult(False, error=f"{self.name}: no answer after {timeout:g} s; killed", timed_out=True)
            kind, value = conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            proc.join(timeout=1)
            code = proc.exitcode
            self.restart()
            return CallResult(False, error=f"{self.name} died (exit code {code})", died=True)
        if kind == "ok":
            return CallResult(True, value=value)
        return CallResult(False, error=value)

    def restart(self) -> None:
        self.stop(kill=True)
        self.restarts += 1
        self.start()

    def ask_to_stop(self) -> None:
        """Asks the child to exit after its current call, without waiting."""
        with self._lock:
            if self._proc is not None and self._proc.is_alive():
                try:
                    self._conn.send(None)
                except (BrokenPipeError, OSError):
                    pass

    def stop(self, kill: bool = False, timeout: float = 5.0) -> None:
        """Stops the child: it exits cleanly if idle within ``timeout`` s, else it is killed."""
        with self._lock:
            if self._proc is None:
                return
            if not kill:
                self.ask_to_stop()
                self._proc.join(timeout=timeout)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout=5)
            self._conn.close()
            self._proc = None
            self._conn = None

    def close(self, timeout: float = 5.0, kill: bool = False) -> None:
        """Stops the child for good (``kill``: at once, without asking): a call still running in
        another thread then fails with :class:`WorkerClosedError` instead of starting a new child."""
        with self._lock:
            self._closed = True
        self.stop(kill=kill, timeout=timeout)

    @staticmethod
    def close_all(workers: list[IsolatedWorker], timeout: float = 5.0) -> None:
        """Closes many workers at once: all are asked first, then each gets what is left of ``timeout``."""
        for worker in workers:
            worker.ask_to_stop()
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.close(timeout=max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> IsolatedWorker:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
