"""Liveness of a tuning process's trials in flight, so that the others can tell a dead one's trials.

On a storage with heartbeats (a relational one opened with ``heartbeat=``, see
:mod:`tilesearch.storage`), a thread records a heartbeat for every trial this tuning process has in
flight, every ``interval`` seconds. Optuna's own heartbeat thread serves ``Study.optimize``,
one trial at a time; the tuning loop keeps many trials in flight (compiling and measuring), so
it beats for all of them here. Any tuning process's :meth:`~tilesearch.database.TuningDatabase.fail_stale`
then fails the trials of a tuning process that stopped beating, and the storage re-queues them.
Storages without heartbeats (journal, in-memory) rely on the host and PID check of
``fail_stale`` alone, which sees only this host's tuning processes.
"""

from __future__ import annotations

import threading
from typing import Any

from optuna.storages import BaseStorage


def interval(storage: BaseStorage) -> int | None:
    """The storage's heartbeat interval in seconds, or ``None`` when it keeps no heartbeats."""
    get = getattr(storage, "get_heartbeat_interval", None)
    return get() if get is not None else None


class Heartbeat:
    """Beats for the trials in flight while the context is open; a no-op without heartbeats.

    Args:
        storage: the study's storage.
    """

    def __init__(self, storage: BaseStorage) -> None:
        self.storage = storage
        self.interval = interval(storage)
        self._trials: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, trial_id: int) -> None:
        """Starts beating for ``trial_id`` (its first beat is written now)."""
        if not self.interval:
            return
        self.storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]
        with self._lock:
            self._trials.add(trial_id)

    def drop(self, trial_id: int) -> None:
        with self._lock:
            self._trials.discard(trial_id)

    def __enter__(self) -> Heartbeat:
        if self.interval:
            self._thread = threading.Thread(target=self._beat, name="tilesearch-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        assert self.interval
        while not self._stop.wait(self.interval):
            with self._lock:
                trials = sorted(self._trials)
            for trial_id in trials:
                try:
                    self.storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]
                except Exception:  # noqa: BLE001 - a lost beat is retried at the next interval
                    pass
