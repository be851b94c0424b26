"""Atomic claims: tuning processes sharing a study never measure one configuration twice.

Reading the study for a configuration's key and then opening a trial for it is a race between
processes: two tuning processes both read "not taken" and both measure. A claim closes it with the one
step every Optuna storage makes atomic and orders: creating a trial. Claiming key ``K`` for trial
``T`` appends a *ticket* (a trial carrying ``K`` and ``T``, created in one step) to a side study
``<study>#claims``; trial numbers follow creation order (Optuna numbers trials under a lock on
the study row in an RDB, in log order in a journal). The side study carries the user attributes
``tilesearch: claims`` and ``claims_of: <study>``; its tickets are not measurements (their value
is the claiming trial's number) and Optuna's dashboards list it beside the study it serves. Study
names holding ``#`` are refused (:func:`tilesearch.database.check_study_name`), so no user study
can be, or write into, another's claims. The claimant then reads the earlier tickets
for ``K``, oldest first, and looks at the trial each one names in the main study:

- still running: another tuning process holds ``K``; the claimant yields (:attr:`Verdict.BUSY`);
- finished with a result (:func:`tilesearch.records.has_result`, the one rule): ``K`` is done;
  the claimant records a copy (:attr:`Verdict.DONE`);
- ended without a result (interrupted, failed by a heartbeat check, yielded itself): skipped.

If no earlier ticket holds ``K``, the claimant owns it, unless the study's budget of distinct
configurations is already held by earlier tickets (running or finished with a result): then it
yields (:attr:`Verdict.FULL`), so that tuning processes starting their last trials together never
overshoot ``trials``. Two owners at once are impossible: the
later ticket's reader sees the earlier ticket, whose trial ends without a result only if its
tuning process yielded or died. Trials that yield to a holder are recorded as ``skipped`` with
``duplicate_of``, those that yield to the budget as ``skipped`` with that reason; a key is free again as soon as its
holder's trial ends without a result.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from tilesearch.database import TrialRecord, TuningDatabase
from tilesearch.records import has_result

SUFFIX = "#claims"
KIND = "claims"  # the side study's user attribute ``tilesearch``, so that tools can tell it apart


class Verdict(str, enum.Enum):
    OWNED = "owned"
    BUSY = "busy"
    DONE = "done"
    FULL = "full"


@dataclass(frozen=True)
class Claim:
    """Outcome of a claim: the verdict, the trial that holds the key unless it is ours, and the
    main study's trials as the claim read them after its ticket (``None`` where it read none), so
    that the caller's own checks need no second read of the storage."""

    verdict: Verdict
    holder: TrialRecord | None = None
    trials: list[FrozenTrial] | None = None


class Claims:
    """The claim tickets of one study, in the same storage.

    Args:
        db: the study's database.
    """

    def __init__(self, db: TuningDatabase) -> None:
        self.db = db
        self.storage = db.storage
        name = db.name + SUFFIX
        try:
            self.study_id = self.storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], name)
        except optuna.exceptions.DuplicatedStudyError:
            self.study_id = self.storage.get_study_id_from_name(name)
        attrs = self.storage.get_study_user_attrs(self.study_id)
        if attrs.get("tilesearch") != KIND:
            self.storage.set_study_user_attr(self.study_id, "tilesearch", KIND)
            self.storage.set_study_user_attr(self.study_id, "claims_of", db.name)
        # Tickets are read through a study, whose storage Optuna caches: finished trials are read
        # once, later reads fetch only newer ones. Every claim reads all earlier tickets, and read
        # from the bare storage that cost grew with the study: 400 claims of a recording took 19 s.
        self._tickets = optuna.load_study(study_name=name, storage=self.storage, sampler=optuna.samplers.RandomSampler())

    def claim(self, number: int, key: str, budget: int | None = None) -> Claim:
        """Claims ``key`` for trial ``number`` of the main study (see the module docstring);
        with ``budget``, yields when that many other configurations are held by earlier tickets."""
        ticket = optuna.trial.create_trial(
            state=TrialState.COMPLETE,
            value=float(number),
            user_attrs={"key": key, "trial": number, "pid": os.getpid()},
        )
        mine = self.storage.get_trial_number_from_id(self.storage.create_new_trial(self.study_id, ticket))
        before = [t for t in self.tickets() if t.number < mine]
        earlier = sorted((t for t in before if t.user_attrs.get("key") == key), key=lambda t: t.number)
        if not earlier and budget is None:
            return Claim(Verdict.OWNED)
        read = self.db.trials()
        trials = {t.number: t for t in read}
        if budget is not None and len(self._held(before, trials) - {key}) >= budget:
            return Claim(Verdict.FULL, trials=read)
        for t in earlier:
            held = trials.get(t.user_attrs["trial"])
            if held is None or held.number == number:
                continue
            if held.state == TrialState.RUNNING and self.db.owner_alive(held) is not False:
                return Claim(Verdict.BUSY, self.db.record_of(held), read)
            record = self.db.record_of(held)
            if held.state.is_finished() and has_result(record):
                return Claim(Verdict.DONE, record, read)
        return Claim(Verdict.OWNED, trials=read)

    def _held(self, tickets: list[FrozenTrial], trials: dict[int, FrozenTrial]) -> set[str]:
        """Keys of ``tickets`` whose trial is running in a live tuning process or finished with a result."""
        held = set()
        for t in tickets:
            trial = trials.get(t.user_attrs.get("trial"))
            if trial is None:
                continue
            if trial.state == TrialState.RUNNING:
                if self.db.owner_alive(trial) is not False:
                    held.add(t.user_attrs["key"])
            elif trial.state.is_finished() and has_result(self.db.record_of(trial)):
                held.add(t.user_attrs["key"])
        return held

    def tickets(self) -> list[FrozenTrial]:
        return self._tickets.get_trials(deepcopy=False)
