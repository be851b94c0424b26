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

import atexit
import importlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_CTX = mp.get_context("spawn")
_FORKED = mp.get_context("forkserver")


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


_preloaded: list[str] = []  # the modules preload() last named: no_fork_server names them again


def preload(modules: Sequence[str]) -> None:
    """Names the modules that the process workers are forked from (``forked=True``) imports once,
    before its first fork. It is one process per tuning process (Python's fork server), so the
    first caller's list holds; a later list changes nothing once a worker has been forked."""
    global _preloaded
    _preloaded = list(modules)
    _FORKED.set_forkserver_preload(_preloaded)


def start_fork_server() -> None:
    """Starts the fork server now, in the background (:func:`preload` first): it imports its
    modules while the caller goes on, and the first forked worker finds them imported sooner.
    Otherwise the server starts with the first forked worker. Idempotent. Where no worker is
    forked after all (a finished study answered from its storage), the server is stopped as this
    process exits, not left to finish its imports alone."""
    global _early_server
    from multiprocessing import forkserver

    forkserver.ensure_running()
    if not _early_server:
        _early_server = True
        atexit.register(_stop_unused_fork_server)


_early_server = False
_forked_any = False


def _stop_unused_fork_server() -> None:
    if not _forked_any:
        stop_fork_server()


def fork_server_pid() -> int | None:
    """The process ID of this process's fork server, if one was started (multiprocessing keeps it
    in a private attribute)."""
    from multiprocessing import forkserver

    return getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)


def stop_fork_server() -> None:
    """Stops the fork server, if one runs, without waiting for its imports: a worker it has yet to
    fork fails to start (and a later start begins a new server), a worker it forked runs on."""
    pid = fork_server_pid()
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)  # it holds no state of ours: nothing to finish, nothing to catch
        except OSError:
            pass


@contextmanager
def no_fork_server() -> Iterator[None]:
    """Stops the fork server (:func:`stop_fork_server`) for the block, which closes the workers
    that were waiting for it.

    A start already under way in another thread (past its worker's closed check, not yet at the
    server) begins a new server if it reaches it after the stop: multiprocessing starts one
    whenever the last has exited. In 2 of 9 runs of a test of a closed compile pool one did, and
    that server imported TileLang while the closing process waited for the start. So a server
    started within the block imports nothing, and such a start ends at once (the block's close
    then stops its worker); as the block ends that server is stopped too, and a later server
    imports the modules :func:`preload` named again."""
    _FORKED.set_forkserver_preload([])
    stop_fork_server()
    try:
        yield
    finally:
        stop_fork_server()
        _FORKED.set_forkserver_preload(_preloaded)


def _serve(conn: Any, env: dict[str, str], nice: int = 0, where: tuple[list[str], str] | None = None) -> None:
    if nice:
        os.nice(nice)  # the compiler processes it starts inherit it
    # Ctrl-C reaches the whole process group; the parent stops its workers itself (tilesearch.shutdown),
    # so a worker must not die of it mid-call, printing a traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if where is not None:  # forked: the parent's environment, path and folder as of now, as spawn gives them
        path, cwd = where
        os.environ.clear()
        sys.path[:] = path
        importlib.invalidate_caches()
        os.chdir(cwd)
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
    """A child process that runs one call at a time, started with ``spawn``, or ``forked`` from a
    process that has imported the :func:`preload` modules already.

    Why forked: the compile pool's 15 processes each imported TileLang (and made NVRTC's
    precompiled header) as they started, 15 times the same seconds of CPU at once. On the H200
    host their warm-ups ended 7.3-9.9 s into README's main command, the CPU 94-100% busy, and the
    first measured trial came after 10.2 s (``scripts/timeline_probe.py``, RESULTS.md). Forked from
    one process that has done it, a worker starts in milliseconds. A forked child gets what a spawned
    one would, as of its start: the parent's environment, ``sys.path`` and working folder; what
    the preloaded modules read as they were imported (once, by the fork server) it does not.
    No CUDA context may exist where it forks, so the runner's workers are spawned.

    Args:
        env: environment variables set in the child before any call (e.g. ``CUDA_VISIBLE_DEVICES``).
        name: shown in error texts.
        nice: added to the child's niceness (lower CPU priority) before any call.
        forked: fork the child from the fork server (see :func:`preload`) instead of spawning it.
    """

    def __init__(self, env: dict[str, str] | None = None, name: str = "worker", nice: int = 0,
                 forked: bool = False) -> None:
        self.env = dict(env or {})
        self.name = name
        self.nice = nice
        self.forked = forked
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0
        # start and stop may run in different threads: a compile pool closed while a thread is
        # still starting a worker process found that process half-started ("can only join a
        # started process"), and the error replaced the one that had made tune stop
        self._lock = threading.RLock()
        self._closed = False

    def start(self) -> None:
        global _forked_any
        with self._lock:
            if self._closed:
                raise WorkerClosedError(f"{self.name} is closed")
            if self._proc is not None and self._proc.is_alive():
                return
            ctx = _FORKED if self.forked else _CTX
            if self.forked:
                _forked_any = True
            where = ([*sys.path], os.getcwd()) if self.forked else None
            env = {**os.environ, **self.env} if self.forked else self.env
            parent, child = ctx.Pipe()
            self._proc = ctx.Process(target=_serve, args=(child, env, self.nice, where), daemon=True, name=self.name)
            try:
                self._proc.start()
            except BaseException:  # not started (a fork server stopped meanwhile): nothing to join later
                self._proc = None
                parent.close()
                raise
            finally:
                child.close()
            self._conn = parent

    @property
    def pid(self) -> int | None:
        proc = self._proc  # read once: another thread may clear it (a failed start, a stop)
        return proc.pid if proc is not None else None

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

    def refuse_starts(self) -> None:
        """Makes every later start fail (:class:`WorkerClosedError`) without taking the lock, which
        a start in progress holds; :meth:`close` still stops the child."""
        self._closed = True

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
