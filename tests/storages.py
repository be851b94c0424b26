"""Storages that several processes can share, for the distributed tests.

PostgreSQL is tested when ``$TILESEARCH_TEST_POSTGRES`` holds a server's URL (``.ci/postgres.sh``
starts one); otherwise those cases skip.
"""

import os
import uuid

import pytest

POSTGRES = os.environ.get("TILESEARCH_TEST_POSTGRES")

SHARED = [
    "sqlite",
    "journal",
    pytest.param("postgres", marks=pytest.mark.skipif(not POSTGRES, reason="TILESEARCH_TEST_POSTGRES not set")),
]


def url(kind, tmp_path):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    if kind == "journal":
        return f"journal:{tmp_path / 'shared.journal'}"
    return POSTGRES


def study(prefix="study"):
    """A study name no other test run uses (PostgreSQL databases outlive the test)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def measured_once(url, study):
    """Key -> latency of a study's measured configurations, after checking what issue 20 asks of a
    study: each configuration measured once, no trial left RUNNING or WAITING, and one COMPLETE
    trial per correct measurement (no copies)."""
    from optuna.trial import TrialState

    from tilesearch.database import TrialRecord, TuningDatabase

    db = TuningDatabase(url, study, read_only=True)
    trials = db.trials()
    # from the storage itself: the study's cache keys trials by number and would show one of two
    numbers = [t.number for t in db.storage.get_all_trials(db.study._study_id, deepcopy=False)]
    db.close()
    assert len(numbers) == len(set(numbers)), "two trials of the study share a number"
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    records = [TrialRecord.from_trial(t) for t in trials if "key" in t.user_attrs]
    done = [r for r in records if r.duplicate_of is None and r.status not in ("invalid", "interrupted", "skipped")]
    assert len(done) == len({r.key for r in done}), "a configuration measured twice"
    assert [t.state for t in trials].count(TrialState.COMPLETE) == sum(r.status == "ok" for r in done)
    return {r.key: r.latency_ms for r in done}
