import os
import subprocess
import sys

import optuna
import pytest

from tilesearch.database import (
    StorageError,
    TuningDatabase,
    find_studies,
    open_storage,
    storage_url,
    studies,
    study_trials,
)
from tilesearch.records import Status
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP
from tilesearch.tuner import tune


def run_toy(storage, trials, runner=None, **kw):
    runner = runner or SyntheticRunner()
    result = tune(TOY_OP, {"size": 8}, runner=runner, storage=storage, trials=trials, progress=False, **kw)
    return result, runner


def test_every_trial_is_stored_with_its_figures(tmp_path):
    storage = f"sqlite:///{tmp_path / 'a.db'}"
    result, runner = run_toy(storage, 6, strategy="random")
    db = TuningDatabase(storage, result.study)
    records = db.records()
    assert len(records) == 6
    for rec in records:
        assert rec.status == Status.OK.value and rec.latency_ms > 0 and rec.config and rec.key
    assert db.study.user_attrs["op"] == "toy" and db.study.user_attrs["problem"] == "size=8"
    assert "tilelang" in db.study.user_attrs["versions"]
    best = db.best(3)
    assert [r.latency_ms for r in best] == sorted(r.latency_ms for r in records)[:3]
    assert result.study.startswith("replay:toy[size=8]@synthetic/sm_90a/tilelang-")  # synthetic counts as replayed


def test_wrong_results_are_never_best(tmp_path):
    storage = f"sqlite:///{tmp_path / 'b.db'}"
    fastest_is_wrong = SyntheticRunner(lambda c: None if c["tile_a"] == 16 else 1.0 + c["depth"])
    result, runner = run_toy(storage, 30, runner=fastest_is_wrong, strategy="grid")
    assert result.statuses.get("wrong_result", 0) > 0
    assert all(r.config["tile_a"] != 16 for r in result.best)


def test_journal_and_memory_storages(tmp_path):
    result, runner = run_toy(f"journal:{tmp_path / 'j.log'}", 4, strategy="grid")
    assert len(runner.calls) == 4
    _, again = run_toy(f"journal:{tmp_path / 'j.log'}", 4, strategy="grid")
    assert again.calls == []
    assert run_toy(":memory:", 3)[0].best


def test_bad_storage_urls():
    with pytest.raises(StorageError, match="not a storage URL"):
        open_storage("results.db")
    with pytest.raises(StorageError, match="cannot open"):
        open_storage("nosuchdriver://x")


def test_storage_url_default_and_env(monkeypatch):
    monkeypatch.delenv("TILESEARCH_STORAGE", raising=False)
    assert storage_url() == "sqlite:///tilesearch.db"
    monkeypatch.setenv("TILESEARCH_STORAGE", "journal:x")
    assert storage_url() == "journal:x" and storage_url("sqlite:///y") == "sqlite:///y"


def test_trials_of_a_killed_process_are_marked_interrupted_and_remeasured(tmp_path):
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    result, _ = run_toy(storage, 3, strategy="grid")
    db = TuningDatabase(storage, result.study)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    trial = db.ask(db.study.trials[0].distributions, params=None)
    trial.set_user_attr("pid", int(dead.stdout))
    trial.set_user_attr("key", "some-key")
    assert db.fail_stale() == 1
    rec = [r for r in db.records() if r.number == trial.number][0]
    assert rec.status == Status.INTERRUPTED.value
    assert "some-key" not in db.finished()
    assert db.fail_stale() == 0 and os.getpid()


def test_a_study_where_two_trials_share_a_number_still_resumes(tmp_path):
    # what a signal inside a storage call could leave before storage calls held signals back
    # (CI: "Multiple rows were found when one or none was required", in every later run): a dead
    # process's RUNNING trials whose number another trial of the study has too
    import socket
    import sqlite3

    path = tmp_path / "d.db"
    result, _ = run_toy(f"sqlite:///{path}", 3, strategy="grid")
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    with sqlite3.connect(path) as con:
        study_id = con.execute("select study_id from studies where study_name = ?", (result.study,)).fetchone()[0]
        for _ in range(2):
            trial_id = con.execute("insert into trials (number, study_id, state, datetime_start) "
                                   "values (3, ?, 'RUNNING', '2026-11-27 00:00:00')", (study_id,)).lastrowid
            con.executemany("insert into trial_user_attributes (trial_id, key, value_json) values (?, ?, ?)",
                            [(trial_id, "pid", str(dead)), (trial_id, "host", f'"{socket.gethostname()}"')])
    again, runner = run_toy(f"sqlite:///{path}", 5, strategy="grid")
    assert len(runner.calls) == 2 and again.statuses.get("ok") == 2
    with sqlite3.connect(path) as con:  # Optuna's study cache keys trials by number: it would show one of the two
        rows = con.execute("select t.number, t.state, a.value_json from trials t join trial_user_attributes a "
                           "on a.trial_id = t.trial_id and a.key = 'status' where t.study_id = ?", (study_id,)).fetchall()
    assert sorted(rows)[-4:] == [(3, "FAIL", '"interrupted"')] * 2 + [(5, "COMPLETE", '"ok"'), (6, "COMPLETE", '"ok"')]
    assert [state for _, state, _ in rows].count("RUNNING") == 0 and len(rows) == 7


def test_find_studies_filters_by_op_and_problem(tmp_path):
    storage = f"sqlite:///{tmp_path / 'd.db'}"
    run_toy(storage, 2)
    tune(TOY_OP, {"size": 9}, runner=SyntheticRunner(), storage=storage, trials=2, progress=False)
    from tilesearch import registry

    op = registry.load(TOY_OP)
    assert len(find_studies(storage, "toy")) == 2
    assert len(find_studies(storage, "toy", op.problem(size=9))) == 1
    assert find_studies(storage, "gemm") == []


def test_finding_studies_reads_no_trials(tmp_path, monkeypatch):
    """A range looks its studies up several times per size; reading every trial of every study
    each time made a resumed range spend seconds on each size it had finished."""
    storage = f"sqlite:///{tmp_path / 'e.db'}"
    run_toy(storage, 3)
    opened = open_storage(storage, read_only=True)

    def no_trials(*args, **kwargs):
        raise AssertionError("a study lookup read trials")

    for name in ("get_all_trials", "_get_trials", "get_n_trials"):
        monkeypatch.setattr(type(opened), name, no_trials)
    assert len(find_studies(opened, "toy")) == 1


def _states(trials):
    return [(t.number, t.state, t.value, dict(t.user_attrs)) for t in trials]


def test_a_study_s_trials_are_read_again_only_where_they_may_have_changed(tmp_path, monkeypatch):
    """The xgb strategy reads every other study of its op on each tune; in one process (a range)
    a finished trial is kept, and only the running ones and those after the last finished are
    asked for, yet the answer is always what the storage holds."""
    storage = open_storage(f"sqlite:///{tmp_path / 'f.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    done = [study.ask() for _ in range(3)]
    for trial in done[:2]:
        study.tell(trial, 1.0)
    running = done[2]
    running.set_user_attr("status", "running")
    frozen = studies(storage)[0]
    asked = []
    read = type(storage)._get_trials

    def spy(self, study_id, states, included_trial_ids, trial_id_greater_than):
        asked.append((set(included_trial_ids), trial_id_greater_than))
        return read(self, study_id, states, included_trial_ids, trial_id_greater_than)

    monkeypatch.setattr(type(storage), "_get_trials", spy)
    got = study_trials(storage, frozen)
    first = asked[:]
    assert _states(got) == _states(storage.get_all_trials(frozen._study_id))
    running.set_user_attr("status", "ok")
    study.tell(running, 2.0)
    later = study.ask()
    study.tell(later, 3.0)
    asked.clear()
    got = study_trials(storage, frozen)
    second = asked[:]
    assert _states(got) == _states(storage.get_all_trials(frozen._study_id)) and len(got) == 4
    assert got[2].user_attrs["status"] == "ok" and got[2].value == 2.0
    ids = [t._trial_id for t in storage.get_all_trials(frozen._study_id)]
    # the first read: everything; the second: the one that was running, and those after the last finished
    assert first == [(set(), -1)] and second == [({ids[2]}, ids[1])]


def test_storages_that_cannot_be_read_in_part_are_read_whole(tmp_path):
    for storage in (open_storage(":memory:"), open_storage(f"journal:{tmp_path / 'j.log'}")):
        study = optuna.create_study(storage=storage, study_name="s")
        study.tell(study.ask(), 1.0)
        assert [t.value for t in study_trials(storage, studies(storage)[0])] == [1.0]
        study.tell(study.ask(), 2.0)
        assert [t.value for t in study_trials(storage, studies(storage)[0])] == [1.0, 2.0]


def test_a_writer_makes_the_folder_of_its_sqlite_file_and_a_reader_does_not(tmp_path):
    with pytest.raises(StorageError):
        open_storage(f"sqlite:///{tmp_path}/absent/tune.db", read_only=True)
    assert not (tmp_path / "absent").exists()
    run_toy(f"sqlite:///{tmp_path}/new/deeper/tune.db", trials=2)
    assert (tmp_path / "new" / "deeper" / "tune.db").is_file()


def test_a_configuration_in_flight_is_taken_whether_or_not_the_asking_trial_carries_its_key(tmp_path):
    # the tuning loop checks a sampler's proposal on the trials its claim read, where the asking
    # trial already carries the key: it must not hide the older trial measuring the same configuration
    from optuna.distributions import IntDistribution

    from tilesearch.records import Candidate
    from tilesearch.target import Target

    db = TuningDatabase(f"sqlite:///{tmp_path / 'k.db'}", "taken")
    candidate = Candidate("toy", {"size": 8}, {"tile_a": 16}, Target.from_arch("sm_90a", gpu="synthetic"), TOY_OP)
    older, newer = (db.ask({"tile_a": IntDistribution(1, 64)}, {"tile_a": 16}) for _ in range(2))
    db.claim(older, candidate)
    assert db.taken(candidate.key, newer.number) == older.number  # before the newer trial's claim
    db.claim(newer, candidate)
    assert db.taken(candidate.key, newer.number) == older.number
    assert db.taken(candidate.key, newer.number, db.trials()) == older.number
    assert db.taken(candidate.key, older.number) == newer.number
    db.close()
