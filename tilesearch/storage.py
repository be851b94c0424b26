"""Opening relational Optuna storages so that several processes can share one study safely.

Two fixes over a plain ``optuna.storages.RDBStorage(url)``:

- SQLite: Python's sqlite3 driver opens a transaction only at the first write, so Optuna's
  read-then-update steps (popping a WAITING trial, above all) are not atomic across processes and
  two tuning processes can pop the same trial. Every transaction here starts with ``BEGIN IMMEDIATE``,
  which takes the database's write lock up front (the recipe in SQLAlchemy's pysqlite notes).
  Tuning processes that open a new database file together race to create its tables: opening is retried.
  The file is kept in WAL mode with ``synchronous=NORMAL``: a commit no longer waits for an
  fsync (it cost 9 ms, 30 times per trial, in the tuning loop), readers do not block the
  writer, and a killed process still loses nothing it committed (a power cut may lose the
  last commits, never the file). WAL needs the file on a local disk, as SQLite always did.
- PostgreSQL: SQLAlchemy 2.1 maps ``postgresql://`` to psycopg 3; when only psycopg2 is
  installed (``pip install psycopg2-binary``) the URL is pointed at it.

Opened ``read_only`` (``show``, ``export``), a SQLite file is opened with ``mode=ro``: nothing is
created (a missing file is an error, not a new empty database), no write lock is taken, and
the file's mode is left alone, so a 0444 database can be read.

Only the race between tuning processes creating a new database's tables is retried; a permanent error
(unknown host, missing database, wrong password) fails at once.

Every method of an opened storage runs whole (:func:`uninterrupted`): a SIGINT or SIGTERM
that arrives inside one is raised when it returns, not inside SQLAlchemy's bookkeeping (see
:mod:`tilesearch.shutdown`).

With ``heartbeat`` seconds, a database server's storage records a heartbeat per running trial
(see :mod:`tilesearch.heartbeat`); a trial silent for ``GRACE_BEATS`` heartbeats is failed by any
tuning process of the study. It is not re-queued as a WAITING copy (Optuna's retry callback): the
strategies fix most configurations themselves and would never pop such a copy, which would stay
in the study for good; the failed trial's configuration is free again and any tuning process proposes
it anew. A SQLite file
serves one host, where the PID check of ``TuningDatabase.fail_stale`` finds dead tuning processes
exactly; heartbeats there would only add false alarms, as a heartbeat can wait seconds for the
file's write lock while other tuning processes read.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import random
import time
import warnings
from typing import Any

import optuna

from tilesearch import shutdown

GRACE_BEATS = 6
_RACES = ("already exists", "duplicate key", "unique constraint", "database is locked")


def rdb_storage(url: str, heartbeat: int | None = None, *, read_only: bool = False) -> optuna.storages.RDBStorage:
    """An ``RDBStorage`` for ``url`` (``sqlite:///...``, ``postgresql://...``, ``mysql://...``)."""
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
        heartbeat = None
        if read_only:
            return ReadOnlySQLite(url.split("///", 1)[1], engine_kwargs=kwargs["engine_kwargs"])
    url = _postgres_driver(url)
    with warnings.catch_warnings():  # heartbeats and the retry callback are marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if heartbeat:
            kwargs.update(heartbeat_interval=int(heartbeat), grace_period=GRACE_BEATS * int(heartbeat))
        for attempt in range(5):
            try:
                storage = optuna.storages.RDBStorage(url, skip_table_creation=read_only, skip_compatibility_check=True,
                                                     **kwargs)
                check_schema(storage)
                break
            except Exception as exc:  # noqa: BLE001 - tuning processes that open a new database together race to create its tables
                if attempt == 4 or read_only or not any(race in str(exc).lower() for race in _RACES):
                    raise
                time.sleep(0.2 + random.random())
    if storage.engine.name == "sqlite" and not read_only:
        _serialize_sqlite(storage.engine)
    return storage


def check_schema(storage: optuna.storages.RDBStorage) -> None:
    """The check Optuna makes as it opens a storage, that its tables have the schema this Optuna
    writes (else Optuna's own error, which says what to run), with that schema read once a
    process: Optuna reads it from its migration scripts at every opening, 36 ms of 48 on a 2-core
    CPU machine (2026-12-03), and each ``TuningDatabase`` opens the storage, some 500 times in a
    range of GEMM sizes. Opened without the check, the storage is then marked as checked: a copy
    unpickled in another process checks again."""
    global _newest_schema
    manager = storage._version_manager
    if _newest_schema is None:
        _newest_schema = manager.get_head_version()
    if manager.get_current_version() != _newest_schema:
        manager.check_table_schema_compatibility()
    storage.skip_compatibility_check = False


_newest_schema: str | None = None  # the installed Optuna's newest table schema (check_schema)


def uninterrupted(storage: optuna.storages.BaseStorage) -> optuna.storages.BaseStorage:
    """``storage``, each of whose methods runs :func:`~tilesearch.shutdown.held`. Its class becomes
    a subclass of its own that wraps them: Optuna's ``isinstance`` checks and ``_CachedStorage``
    still see the class they know, and each call looks the method up anew on that class."""
    kind = type(storage)
    if kind not in _GUARDED:
        names = [n for n in dir(kind) if not n.startswith("__") and inspect.isfunction(inspect.getattr_static(kind, n))]
        _GUARDED[kind] = type(kind.__name__, (kind,), {"__module__": kind.__module__, **{n: _held(kind, n) for n in names}})
    storage.__class__ = _GUARDED[kind]
    return storage


_GUARDED: dict[type, type] = {}


def _held(kind: type, name: str) -> Any:
    @functools.wraps(getattr(kind, name))
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with shutdown.held():
            return getattr(kind, name)(self, *args, **kwargs)

    return call


def set_trial_user_attrs(storage: optuna.storages.BaseStorage, trial_id: int, attrs: dict[str, Any]) -> None:
    """Writes ``attrs`` on a running trial; into a relational storage in one transaction, as one
    statement on SQLite and PostgreSQL.

    Why: Optuna writes each attribute in a transaction of its own, and a trial's record is about
    ten (its latency, interval, runs, clock, phases, ...): with the claim's two, 11 of the 20
    transactions of a README-command trial on SQLite, 0.9 s of the tuning loop's 5.3 s of database
    writes over 48 synthetic trials on the 2-core CI machine. One transaction also keeps a record
    whole: a process killed while writing it leaves none of it, not a part. Within it, Optuna's
    own write of one attribute reads the trial again and upserts one row; a record's 17 attributes
    were 1,133 such writes in a replay of README's main command, 1.6 of its 6.0 s under a profiler
    (``experiments/results/fast/replay_database_cpu_2026-12-05``), so the trial is read once and
    its rows upserted together, with Optuna's own check and encoding. Other storages (a journal,
    memory) take the attributes one by one, as Optuna writes them."""
    write = getattr(storage, "_set_trial_attr_without_commit", None)
    if not isinstance(storage, optuna.storages.RDBStorage) or write is None:
        for key, value in attrs.items():
            storage.set_trial_user_attr(trial_id, key, value)
        return
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    with shutdown.held(), _create_scoped_session(storage.scoped_session, True) as session:
        upsert = _upsert(storage.engine.name, models.TrialUserAttributeModel, trial_id, attrs) if attrs else None
        if upsert is None:
            for key, value in attrs.items():
                write(session, models.TrialUserAttributeModel, trial_id, key, value)
            return
        trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
        storage.check_trial_is_updatable(trial_id, trial.state)
        session.execute(upsert)


def _upsert(engine: str, model: Any, trial_id: int, attrs: dict[str, Any]) -> Any:
    """One statement that inserts ``attrs`` as rows of ``model`` for the trial, replacing the
    values of keys it has, as Optuna's write of one attribute does; ``None`` for other databases
    (MySQL, SQLite before 3.24: Optuna's own writes, one by one)."""
    import json
    import sqlite3

    rows = [{"trial_id": trial_id, "key": key, "value_json": json.dumps(value)} for key, value in attrs.items()]
    if engine == "sqlite" and sqlite3.sqlite_version_info >= (3, 24, 0):
        from sqlalchemy.dialects import sqlite as dialect
    elif engine == "postgresql":
        from sqlalchemy.dialects import postgresql as dialect  # type: ignore[no-redef]
    else:
        return None
    statement = dialect.insert(model).values(rows)
    return statement.on_conflict_do_update(index_elements=[model.trial_id, model.key],
                                           set_={"value_json": statement.excluded.value_json})


class ReadOnlySQLite(optuna.storages.RDBStorage):
    """An SQLite file read through :func:`_read_only_sqlite`'s URL, and read again, on a
    connection opened anew, after a read that found the file changing under it ("database disk
    image is malformed"). Opened ``immutable`` while no process had the file open, a reader is not
    protected from a writer that starts and checkpoints its log into the file meanwhile; opened
    again, it follows that writer's log with the usual locks, or reads the finished file. In CI
    two chains of killed tuning processes shared one file, and a read between two of them failed
    this way once. Every read of the storage is covered (:data:`READS`): ``show``, ``export`` and
    a served study read through it."""

    def __init__(self, path: str, **kwargs: Any) -> None:
        self._path, self._kwargs = path, kwargs
        super().__init__(_read_only_sqlite(path), skip_table_creation=True, skip_compatibility_check=True, **kwargs)
        check_schema(self)

    def reopen(self) -> None:
        """Drops the connections and connects again, with the flag the file needs now."""
        self.remove_session()
        self.engine.dispose()
        super().__init__(_read_only_sqlite(self._path), skip_table_creation=True, skip_compatibility_check=True,
                         **self._kwargs)
        check_schema(self)


# every read: the storage's own, and those Optuna's study cache calls on it
READS = tuple(n for n in dir(optuna.storages.RDBStorage)
              if n.startswith("get_") or n in ("_get_trials", "_get_best_trial_id", "_get_stale_trial_ids"))


def torn(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says an SQLite file changed under its reader."""
    cause: BaseException | None = exc
    while cause is not None:
        if "malformed" in str(cause):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _read_again(name: str) -> Any:
    read = getattr(optuna.storages.RDBStorage, name)

    def again(self: ReadOnlySQLite, *args: Any, **kwargs: Any) -> Any:
        try:
            return read(self, *args, **kwargs)
        except Exception as exc:
            if not torn(exc):
                raise
        self.reopen()
        return read(self, *args, **kwargs)

    again.__name__ = again.__qualname__ = name
    again.__doc__ = read.__doc__
    return again


for _name in READS:
    setattr(ReadOnlySQLite, _name, _read_again(_name))


def _read_only_sqlite(path: str) -> str:
    """A URL that reads ``path`` and creates nothing beside it.

    A ``mode=ro`` connection to a WAL database creates ``-wal`` and ``-shm`` files when they are
    missing, and cannot remove them when it closes. They are missing only while no connection is
    open (the last one to close removes them), so then the file is opened ``immutable``, which
    takes no locks and creates nothing; a writer that starts meanwhile writes to its own new
    ``-wal``, not to the file being read, until it checkpoints. When they exist, a writer may be
    at work, and ``mode=ro`` reads through its log with the usual locks."""
    flag = "mode=ro" if os.path.exists(f"{path}-wal") else "immutable=1"
    return f"sqlite:///file:{path}?{flag}&uri=true"


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

