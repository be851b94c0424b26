import importlib.util
import multiprocessing as mp
import os
import time

import optuna
import pytest
import storages
from optuna.trial import TrialState

from tilesearch import database
from tilesearch.database import TrialRecord, TuningDatabase, open_storage
from tilesearch.storage import _postgres_driver


def _pop_all(url, study, barrier, popped):
    db = TuningDatabase(url, study)
    barrier.wait()
    mine = []
    while True:
        trial_id = db.study._pop_waiting_trial_id()
        if trial_id is None:
            break
        mine.append(trial_id)
    popped.put(mine)


@pytest.mark.parametrize("kind", storages.SHARED)
def test_waiting_trials_are_popped_once_across_processes(kind, tmp_path):
    """Regression: on SQLite, Optuna's pop of an enqueued trial read and updated in two
    transactions, and two processes popped the same trial (51 of 200 twice, 6 processes)."""
    url, study = storages.url(kind, tmp_path), storages.study("pop")
    db = TuningDatabase(url, study)
    for i in range(60):
        db.study.enqueue_trial({"x": i})
    ctx = mp.get_context("spawn")
    barrier, popped = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_pop_all, args=(url, study, barrier, popped)) for _ in range(3)]
    for proc in procs:
        proc.start()
    ids = [i for _ in procs for i in popped.get(timeout=300)]
    for proc in procs:
        proc.join(timeout=60)
    assert len(ids) == len(set(ids)) == 60


def test_postgres_url_uses_the_driver_that_is_installed():
    url = "postgresql://u@127.0.0.1:5432/db"
    has = {name: importlib.util.find_spec(name) is not None for name in ("psycopg", "psycopg2")}
    expected = "postgresql+psycopg2" if has["psycopg2"] and not has["psycopg"] else "postgresql"
    assert _postgres_driver(url) == f"{expected}://u@127.0.0.1:5432/db"
    assert _postgres_driver("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert _postgres_driver("sqlite:///x.db") == "sqlite:///x.db"


def test_sqlite_and_journal_storages_keep_no_heartbeats(tmp_path):
    """One host: the PID check finds dead workers exactly; heartbeats would only add false alarms."""
    for url in (f"sqlite:///{tmp_path / 'a.db'}", f"journal:{tmp_path / 'a.journal'}"):
        assert not optuna.storages._heartbeat.is_heartbeat_enabled(open_storage(url, heartbeat=5))


def test_a_trial_failed_for_its_lost_heartbeat_reads_interrupted(tmp_path):
    db = TuningDatabase(":memory:", "s")
    trial = db.ask({"x": optuna.distributions.IntDistribution(0, 3)})
    trial.set_user_attr("key", "K")
    db.study.tell(trial.number, state=TrialState.FAIL)  # what fail_stale_trials does
    record = TrialRecord.from_trial(db.trials()[0])
    assert record.status == "interrupted" and "K" not in db.finished()


def test_a_trial_whose_pid_is_not_written_yet_is_not_taken_for_dead():
    """Regression: fail_stale of another worker marked a trial interrupted between the moment
    its worker wrote the host and the moment it wrote the PID."""
    db = TuningDatabase(":memory:", "s")
    trial = db.study.ask({"x": optuna.distributions.IntDistribution(0, 3)})
    trial.set_user_attr("host", db._host)
    assert db.fail_stale() == 0
    assert db.trials()[0].state == TrialState.RUNNING


def test_a_trial_abandoned_before_its_pid_was_written_is_closed_after_a_while(monkeypatch):
    db = TuningDatabase(":memory:", "s")
    db.study.ask({"x": optuna.distributions.IntDistribution(0, 3)})
    assert db.fail_stale() == 0
    monkeypatch.setattr(database, "ABANDONED_S", -1.0)
    assert db.fail_stale() == 1
    assert TrialRecord.from_trial(db.trials()[0]).status == "interrupted"


@pytest.mark.skipif(not storages.POSTGRES, reason="TILESEARCH_TEST_POSTGRES not set")
def test_postgres_heartbeat_fails_and_requeues_a_silent_remote_worker():
    """A worker on another host stops beating: any worker fails its trial. It is not re-queued as a
    WAITING copy, which strategies that fix their configurations would never pop (issue 20)."""
    study = storages.study("beat")
    db = TuningDatabase(storages.POSTGRES, study, heartbeat=1)
    trial = db.ask({"x": optuna.distributions.IntDistribution(0, 3)})
    trial.set_user_attr("host", "another-host")  # the PID check cannot see it
    trial.set_user_attr("key", "K")
    db.storage.record_heartbeat(trial._trial_id)
    time.sleep(8)  # grace: 6 heartbeats of 1 s
    db.fail_stale()
    states = [t.state for t in db.trials()]
    assert states == [TrialState.FAIL]
    assert TrialRecord.from_trial(db.trials()[0]).status == "interrupted"


def test_a_trial_is_opened_running_with_its_owner_and_params_in_one_step():
    """Issue 20: enqueue + ask left WAITING trials behind when a worker died in between, and
    trials without an owner that only ABANDONED_S cleared."""
    db = TuningDatabase(":memory:", "s")
    trial = db.ask({"x": optuna.distributions.IntDistribution(0, 3)}, {"x": 2})
    (frozen,) = db.trials()
    assert frozen.state == TrialState.RUNNING and frozen.params == {"x": 2} == trial.params
    assert frozen.user_attrs["pid"] == os.getpid() and frozen.user_attrs["host"] == db._host


def test_waiting_trials_left_by_older_versions_are_closed_as_skipped():
    db = TuningDatabase(":memory:", "s")
    db.study.enqueue_trial({"x": 1})
    db.fail_stale()
    (frozen,) = db.trials()
    assert frozen.state == TrialState.FAIL and TrialRecord.from_trial(frozen).status == "skipped"


@pytest.mark.skipif(importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg") is None,
                    reason="no PostgreSQL driver")
def test_a_permanent_connection_error_is_not_retried(monkeypatch):
    """Issue 20: a refused connection (or an unknown host, a missing database) was retried 5 times."""
    from tilesearch import storage

    sleeps = []
    monkeypatch.setattr(storage.time, "sleep", sleeps.append)
    with pytest.raises(database.StorageError, match="Connection refused|connection"):
        open_storage("postgresql://nobody@127.0.0.1:1/nothing")
    assert sleeps == []


def test_a_read_only_reader_opens_the_file_again_after_a_torn_read(tmp_path, monkeypatch):
    # opened "immutable" while no process had the file open, a reader can find it changing under
    # it when a writer starts and checkpoints; it then opens the file again and reads once more,
    # whoever reads (a TuningDatabase, show's summaries, an export)
    import sqlalchemy.exc

    from tilesearch import storage

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    optuna.create_study(storage=url, study_name="s").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    db = TuningDatabase(url, "s", read_only=True)
    assert isinstance(db.storage, storage.ReadOnlySQLite)
    engine, real = db.storage.engine, optuna.storages.RDBStorage._get_trials
    failures = []

    def torn_once(self, *args, **kwargs):
        if not failures:
            failures.append(1)
            try:
                raise sqlalchemy.exc.DatabaseError("SELECT", {}, Exception("database disk image is malformed"))
            except sqlalchemy.exc.DatabaseError as exc:
                raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc
        return real(self, *args, **kwargs)

    monkeypatch.setattr(optuna.storages.RDBStorage, "_get_trials", torn_once)  # what Optuna's study cache reads through
    monkeypatch.setattr(storage.ReadOnlySQLite, "_get_trials", storage._read_again("_get_trials"))
    assert len(db.trials()) == 2 and failures == [1] and db.storage.engine is not engine
    # any other storage error is not a torn read
    monkeypatch.setattr(optuna.storages.RDBStorage, "get_all_studies", lambda *a, **k: (_ for _ in ()).throw(
        optuna.exceptions.StorageInternalError("disk I/O error")))
    monkeypatch.setattr(storage.ReadOnlySQLite, "get_all_studies", storage._read_again("get_all_studies"))
    with pytest.raises(optuna.exceptions.StorageInternalError, match="disk I/O"):
        db.storage.get_all_studies()
    db.close()


def test_a_storage_of_an_older_schema_is_refused_though_the_newest_schema_is_read_once(tmp_path, monkeypatch):
    import sqlite3

    from optuna.storages._rdb.storage import _VersionManager

    from tilesearch import storage
    from tilesearch.database import StorageError

    heads, real = [], _VersionManager.get_head_version
    monkeypatch.setattr(_VersionManager, "get_head_version", lambda self: heads.append(1) or real(self))
    monkeypatch.setattr(storage, "_newest_schema", None)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    for _ in range(3):
        open_storage(url)
        open_storage(url, read_only=True)
    assert len(heads) == 2  # stamped on the new file, and read once for the check
    with sqlite3.connect(tmp_path / "db.sqlite") as db:
        db.execute("UPDATE alembic_version SET version_num = 'v3.0.0.d'")
    for read_only in (False, True):
        with pytest.raises(StorageError, match="no longer compatible with the table schema.*optuna storage upgrade"):
            open_storage(url, read_only=read_only)


@pytest.mark.parametrize("kind", storages.SHARED)
def test_a_records_attributes_are_written_together_and_read_back_as_optuna_writes_them(kind, tmp_path):
    from tilesearch.storage import set_trial_user_attrs

    url, name = storages.url(kind, tmp_path), storages.study("attrs")
    db = TuningDatabase(url, name)
    trial = db.study.ask()
    db.study.tell(db.study.ask(), 1.0)
    first = {"latency_ms": 1.25, "runs": [1, 2], "phases": {"load": 0.5}, "error": None, "note": "a\"b"}
    set_trial_user_attrs(db.storage, trial._trial_id, first)
    set_trial_user_attrs(db.storage, trial._trial_id, {"latency_ms": 1.5, "status": "ok"})  # one replaced, one new
    set_trial_user_attrs(db.storage, trial._trial_id, {})
    read = open_storage(url).get_trial(trial._trial_id).user_attrs
    assert read == {**first, "latency_ms": 1.5, "status": "ok"}
    finished = db.study.trials[1]
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        set_trial_user_attrs(db.storage, finished._trial_id, {"x": 1})
    assert "x" not in open_storage(url).get_trial(finished._trial_id).user_attrs
