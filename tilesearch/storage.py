"""Opening relational Optuna storages so that several processes can share one study safely.

Two fixes over a plain ``optuna.storages.RDBStorage(url)``:

- SQLite: Python's sqlite3 driver opens a transaction only at the first write, so Optuna's
  read-then-update steps (popping a WAITING trial, above all) are not atomic across processes and
  two workers can pop the same trial. Every transaction here starts with ``BEGIN IMMEDIATE``,
  which takes the database's write lock up front (the recipe in SQLAlchemy's pysqlite notes).
  Workers that open a new database file together race to create its tables: opening is retried.
  The file is kept in WAL mode with ``synchronous=NORMAL``: a commit no longer waits for an
  fsync (it cost 9 ms, 30 times per trial, in the tuning loop), readers do not block the
  writer, and a killed process still loses nothing it committed (a power cut may lose the
  last commits, never the file). WAL needs the file on a local disk, as SQLite always did.
- PostgreSQL: SQLAlchemy 2.1 maps ``postgresql://`` to psycopg 3; when only psycopg2 is
  installed (``pip install psycopg2-binary``) the URL is pointed at it.

With ``heartbeat`` seconds, a database server's storage records a heartbeat per running trial
(see :mod:`tilesearch.heartbeat`); a trial silent for ``GRACE_BEATS`` heartbeats is failed by any
worker of the study and re-queued for another worker (Optuna's retry callback). A SQLite file
serves one host, where the PID check of ``TuningDatabase.fail_stale`` finds dead workers
exactly; heartbeats there would only add false alarms, as a heartbeat can wait seconds for the
file's write lock while other workers read.
"""

from __future__ import annotations

import importlib.util
import random
import time
import warnings
from typing import Any

import optuna

GRACE_BEATS = 6
MAX_RETRY = 2


def rdb_storage(url: str, heartbeat: int | None = None) -> optuna.storages.RDBStorage:
    """An ``RDBStorage`` for ``url`` (``sqlite:///...``, ``postgresql://...``, ``mysql://...``)."""
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
        heartbeat = None
    url = _postgres_driver(url)
    with warnings.catch_warnings():  # heartbeats and the retry callback are marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if heartbeat:
            kwargs.update(
                heartbeat_interval=int(heartbeat),
                grace_period=GRACE_BEATS * int(heartbeat),
                heartbeat_stale_trial_callback=_retry(max_retry=MAX_RETRY),
            )
        for attempt in range(5):
            try:
                storage = optuna.storages.RDBStorage(url, **kwargs)
                break
            except Exception:  # noqa: BLE001 - workers that open a new database together race to create its tables
                if attempt == 4:
                    raise
                time.sleep(0.2 + random.random())
    if storage.engine.name == "sqlite":
        _serialize_sqlite(storage.engine)
    return storage


def _postgres_driver(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres") or not sep:
        return url
    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
        return f"postgresql+psycopg2://{rest}"
    return f"postgresql://{rest}"


def _serialize_sqlite(engine: Any) -> None:
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _driver_leaves_transactions_to_us(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    @event.listens_for(engine, "begin")
    def _take_write_lock(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the listeners existed


def _retry(max_retry: int) -> Any:
    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)  # Optuna >= 4.9
    return (retry or optuna.storages.RetryFailedTrialCallback)(max_retry=max_retry)
