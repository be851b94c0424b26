import multiprocessing as mp
import os

import pytest
import storages
from optuna.distributions import IntDistribution

from tilesearch.claim import Claims, Verdict
from tilesearch.database import TuningDatabase
from tilesearch.records import BuildResult, Candidate, RunResult, Status
from tilesearch.target import Target

DIST = {"x": IntDistribution(0, 100)}


def candidate(x=1):
    return Candidate("toy", {"size": 64}, {"x": x}, Target.from_arch("sm_90a"))


def opened(db, cand):
    trial = db.ask(DIST)
    db.claim(trial, cand)
    return trial


def dead_pid():
    proc = mp.get_context("spawn").Process(target=os.getpid)
    proc.start()
    proc.join()
    return proc.pid


@pytest.fixture
def db(tmp_path):
    return TuningDatabase(f"sqlite:///{tmp_path / 'claims.db'}", "s")


def test_first_claim_owns_the_key_and_a_second_sees_it_busy(db):
    claims, cand = Claims(db), candidate()
    first, second = opened(db, cand), opened(db, cand)
    assert claims.claim(first.number, cand.key).verdict == Verdict.OWNED
    busy = claims.claim(second.number, cand.key)
    assert busy.verdict == Verdict.BUSY and busy.holder.number == first.number
    assert claims.claim(opened(db, candidate(2)).number, candidate(2).key).verdict == Verdict.OWNED


def test_a_key_measured_by_its_holder_is_done(db):
    claims, cand = Claims(db), candidate()
    first = opened(db, cand)
    claims.claim(first.number, cand.key)
    db.record(first, BuildResult(cand, ok=True), RunResult(Status.OK, latency_ms=1.5))
    done = claims.claim(opened(db, cand).number, cand.key)
    assert done.verdict == Verdict.DONE and done.holder.number == first.number and done.holder.latency_ms == 1.5


@pytest.mark.parametrize("how", ["interrupted", "process died", "yielded"])
def test_a_key_whose_holder_ended_without_a_result_is_free_again(db, how):
    claims, cand = Claims(db), candidate()
    first = opened(db, cand)
    claims.claim(first.number, cand.key)
    if how == "interrupted":
        db.interrupt([first.number])
    elif how == "process died":
        first.set_user_attr("pid", dead_pid())
    else:
        db.record_invalid(first, cand, "same configuration as trial 99, in flight", 99)
    assert claims.claim(opened(db, cand).number, cand.key).verdict == Verdict.OWNED


def test_claim_tickets_live_beside_the_study_not_in_it(db):
    claims, cand = Claims(db), candidate()
    claims.claim(opened(db, cand).number, cand.key)
    assert len(db.trials()) == 1 and len(claims.tickets()) == 1
    assert db.records()[0].key == cand.key


@pytest.mark.parametrize("kind", storages.SHARED)
def test_processes_claiming_one_key_at_once_yield_to_exactly_one(kind, tmp_path):
    """The race the claim closes: every process opens its trial, then all claim the same key
    at the same moment; one owns it, the others see it busy."""
    from tilesearch.testing.worker import claim_race

    ctx = mp.get_context("spawn")
    n = 4
    barrier, verdicts = ctx.Barrier(n), ctx.Queue()
    url, study = storages.url(kind, tmp_path), storages.study("race")
    TuningDatabase(url, study)  # create the study (and tables) before the race
    procs = [ctx.Process(target=claim_race, args=(url, study, "K", barrier, verdicts)) for _ in range(n)]
    for proc in procs:
        proc.start()
    results = [verdicts.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert all(proc.exitcode == 0 for proc in procs)
    assert sorted(v for _, v in results) == ["busy"] * (n - 1) + ["owned"]


def test_a_claim_past_the_budget_yields_and_frees_its_key(db):
    """Regression: two workers starting their last trials together made a 20-trial study 22."""
    claims = Claims(db)
    first, second = opened(db, candidate(1)), opened(db, candidate(2))
    assert claims.claim(first.number, candidate(1).key, budget=2).verdict == Verdict.OWNED
    assert claims.claim(second.number, candidate(2).key, budget=2).verdict == Verdict.OWNED
    late = opened(db, candidate(3))
    assert claims.claim(late.number, candidate(3).key, budget=2).verdict == Verdict.FULL
    db.record_invalid(late, candidate(3), "budget: taken")
    db.interrupt([second.number])  # a slot comes free: the key that yielded can be owned again
    assert claims.claim(opened(db, candidate(3)).number, candidate(3).key, budget=2).verdict == Verdict.OWNED
