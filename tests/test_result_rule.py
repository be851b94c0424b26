"""One rule for what counts as a result (tilesearch.records.has_result), pinned through every
caller that used to decide it on its own: the database (finished, evaluated, planned, best), the
claims (done, budget), the cost model's labels, dataset rows and their ``ok``."""

import pytest
from optuna.distributions import IntDistribution

from tilesearch import dataset
from tilesearch.claim import Claims, Verdict
from tilesearch.cost_model.xgb import labels
from tilesearch.database import TuningDatabase
from tilesearch.records import BuildResult, Candidate, RunResult, Status, has_result, is_correct, is_settled
from tilesearch.target import Target

DIST = {"x": IntDistribution(0, 100)}

# kind -> (has a result, settles its configuration, measured correct)
TABLE = {
    "ok": (True, True, True),
    "wrong_result": (True, True, False),
    "compile_error": (True, True, False),
    "compile_timeout": (True, True, False),
    "runtime_error": (True, True, False),
    "run_timeout": (True, True, False),
    "invalid": (False, True, False),
    "not_recorded": (False, True, False),
    "skipped": (False, False, False),  # a yield to the budget
    "duplicate": (False, False, False),  # a repeat of another trial's configuration
    "copy of ok": (False, False, False),  # an ok record marked as a copy (older studies)
    "interrupted": (False, False, False),
    "running": (False, False, False),
    "unknown": (False, False, False),  # finished, but not written by tilesearch
}
KINDS = list(TABLE)


def candidate(x):
    return Candidate("toy", {"size": 64}, {"x": x}, Target.from_arch("sm_90a"))


def write(db, claims, kind, x, first):
    """Opens a trial for configuration ``x``, claims it, and ends it as ``kind``."""
    cand = candidate(x)
    trial = db.ask(DIST, {"x": x})
    db.claim(trial, cand)
    assert claims.claim(trial.number, cand.key).verdict == Verdict.OWNED
    built = BuildResult(cand, ok=True)
    if kind in ("ok", "copy of ok"):
        if kind == "copy of ok":
            trial.set_user_attr("duplicate_of", first)
        db.record(trial, built, RunResult(Status.OK, latency_ms=1.0 + x, tflops=100.0 - x))
    elif kind == "wrong_result":
        db.record(trial, built, RunResult(Status.WRONG_RESULT, latency_ms=0.5, rel_err=1.0))
    elif kind in ("compile_error", "compile_timeout"):
        db.record(trial, BuildResult(cand, ok=False, error="x", timed_out=kind == "compile_timeout"), None)
    elif kind in ("runtime_error", "run_timeout", "not_recorded"):
        db.record(trial, built, RunResult(Status(kind), error="x"))
    elif kind == "invalid":
        db.record_invalid(trial, cand, "block too large")
    elif kind == "skipped":
        db.record_skipped(trial, cand, "budget: the study's trials are taken")
    elif kind == "duplicate":
        db.record_skipped(trial, cand, "same configuration", first)
    elif kind == "interrupted":
        db.interrupt([trial.number])
    elif kind == "unknown":
        db.study.tell(trial, 1.0)
    else:
        assert kind == "running"
    return cand.key


@pytest.fixture
def study(tmp_path):
    db = TuningDatabase(f"sqlite:///{tmp_path / 'rule.db'}", "s")
    claims = Claims(db)
    keys = {kind: write(db, claims, kind, x, 0) for x, kind in enumerate(KINDS)}
    return db, claims, keys


def expected(column):
    return {kind for kind, row in TABLE.items() if row[column]}


def test_the_rule_on_every_kind_of_record(study):
    db, _, keys = study
    by_key = {r.key: r for r in db.records()}
    assert len(by_key) == len(KINDS)
    for kind, (result, settled, correct) in TABLE.items():
        record = by_key[keys[kind]]
        assert (has_result(record), is_settled(record), is_correct(record)) == (result, settled, correct), kind


def test_the_database_counts_by_the_rule(study):
    db, _, keys = study
    kind_of = {key: kind for kind, key in keys.items()}
    assert {kind_of[k] for k in db.finished()} == expected(1)
    assert db.evaluated() == len(expected(0))
    assert db.planned() == len(expected(0)) + 1  # and the running trial
    assert {kind_of[r.key] for r in db.best(100)} == expected(2)


def test_claims_see_a_result_as_done_and_count_it_in_the_budget(study):
    db, claims, keys = study
    held = len(expected(0)) + 1  # the results and the live running trial
    assert held == db.planned()
    yielded = db.ask(DIST)
    assert claims.claim(yielded.number, candidate(99).key, budget=held).verdict == Verdict.FULL
    db.record_skipped(yielded, candidate(99), "budget")  # as the tuner does: a yield holds nothing
    assert claims.claim(db.ask(DIST).number, candidate(98).key, budget=held + 1).verdict == Verdict.OWNED
    for kind, key in keys.items():
        verdict = claims.claim(db.ask(DIST).number, key).verdict
        want = Verdict.DONE if kind in expected(0) else Verdict.BUSY if kind == "running" else Verdict.OWNED
        assert verdict == want, kind


def test_cost_model_labels_and_dataset_rows_follow_the_rule(study):
    db, _, _ = study
    records = db.records()
    configs, tflops = labels(records)
    assert sorted(c["x"] for c in configs) == sorted(KINDS.index(k) for k in expected(0))
    assert [t is not None for t in tflops] == [c["x"] == KINDS.index("ok") for c in configs]
    rows = dataset.rows_from_records(records)
    assert sorted(r.config["x"] for r in rows) == sorted(KINDS.index(k) for k in expected(0))
    assert [r.config["x"] for r in rows if r.ok] == [KINDS.index("ok")]


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_a_dataset_row_has_a_result_exactly_when_a_trial_of_its_status_does(status):
    row = dataset.Row({"x": 1}, status, latency_ms=1.0)
    assert has_result(row) == TABLE.get(status, TABLE["skipped"])[0]
    assert row.ok == (status == "ok")


def test_dataset_rows_and_artifact_metadata_take_their_figures_from_the_one_declaration():
    from dataclasses import fields

    from tilesearch.deploy import artifact
    from tilesearch.records import FIGURES, Figures, figures

    assert issubclass(dataset.Row, Figures)
    assert set(dataset.KEPT) <= set(FIGURES) and set(artifact.KEPT) <= set(FIGURES)
    # the metadata declares exactly the figures it keeps, no other and none of its own
    assert {f.name for f in fields(artifact.Metadata)} & set(FIGURES) == set(artifact.KEPT)
    row = dataset.Row({"x": 1}, "ok", latency_ms=2.0, speedup=1.5, latency_low=1.9)
    assert figures(row, artifact.KEPT) == {"latency_ms": 2.0, "baseline_ms": None, "speedup": 1.5, "tflops": None}
    assert "latency_low" not in row.to_json()  # the file format keeps only dataset.KEPT
    with pytest.raises(ValueError, match="not figures"):
        figures(row, ("latency",))
