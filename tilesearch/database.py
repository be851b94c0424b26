"""The tuning database: every trial of a search, kept in an Optuna study.

Any Optuna storage works: ``sqlite:///tilesearch.db`` (the default, no server), a
``postgresql://`` URL, ``journal:FILE`` for several processes on one host, or ``:memory:``. A
study holds one problem on one GPU with one TileLang version; its trials carry the configuration,
its content key, the status and error, and every measured figure as user attributes. A
configuration whose key already has a finished trial is never measured again, so running the
same command twice resumes.

A study counts one trial per configuration it tried. A configuration proposed again (a sampler's
repeat, a yield to another tuning process or to the budget) is not given a trial when the tuner can see
it first; when a sampler already opened one, it is closed as FAIL with status ``skipped``.
Not PRUNED: Optuna's TPE ranks pruned trials below every complete one, so a repeat of the best
configuration recorded as pruned would steer TPE away from the best region; not a COMPLETE copy:
that counts a measurement twice. TPE ignores FAIL trials. Trials are opened RUNNING with their
parameters, PID and host in one step, never enqueued as WAITING first, so a process killed at
any moment leaves no WAITING trial and no trial without an owner. Several processes may share a study (see :mod:`tilesearch.claim`
for how they avoid measuring a configuration twice, :mod:`tilesearch.storage` for the storages).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tilesearch import heartbeat, shutdown, versions
from tilesearch.errors import TilesearchError, root_cause
from tilesearch.op import Problem
from tilesearch.provenance import IDENTITY_ATTR, StaleStudyError, differences, tag
from tilesearch.records import (
    FIGURES,
    BuildResult,
    Candidate,
    Figures,
    Final,
    RunResult,
    Status,
    has_result,
    is_correct,
    is_settled,
    speeds,
)
from tilesearch.storage import rdb_storage, set_trial_user_attrs, uninterrupted
from tilesearch.target import Target

DEFAULT_STORAGE = "sqlite:///tilesearch.db"
FINAL_ATTR = "final"  # study attribute: the last final re-time and the trial count it covered
# study attribute: the range (its key) that this study's size certifies. Such a study is held out:
# no search transfers from it (strategy.xgb), or a range tuned again after its certification
# would learn the sizes that judge it
HELDOUT_ATTR = "heldout_of"
ABANDONED_S = 600.0  # trials opened by older versions got their PID right after opening
RESERVED = "#"  # study names with it belong to tilesearch (the claims side study, see tilesearch.claim)
MAX_STUDY_NAME = 505  # Optuna's RDB column holds 512 characters, less the claims suffix


# trials without a status attribute: still open, or failed by a heartbeat check (their tuning process died)
_STATE_STATUS = {
    TrialState.RUNNING: "running",
    TrialState.WAITING: "waiting",
    TrialState.FAIL: Status.INTERRUPTED.value,
}


class StorageError(TilesearchError, ValueError):
    """A storage that cannot be opened or used, or a study name it cannot hold."""


class NoStudyError(TilesearchError, LookupError):
    """No study of the problem in the storage, or none of the name asked for."""


class MissingStorageError(StorageError):
    """A storage file that a read-only command would have to create: it holds no study yet."""


FORMS = "use sqlite:///FILE.db, postgresql://USER@HOST/DB, journal:FILE or :memory:"


def storage_url(url: str | None = None) -> str:
    """The storage to use: ``url``, else ``$TILESEARCH_STORAGE``, else the SQLite default."""
    if url is not None and not url.strip():
        raise StorageError(f"storage= is empty; {FORMS}")
    return url or os.environ.get("TILESEARCH_STORAGE") or DEFAULT_STORAGE


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///FILE`` URL, ``None`` for another storage."""
    if not url.startswith("sqlite:"):
        return None
    path = url.split("///", 1)[1].split("?", 1)[0] if "///" in url else ""
    if not path:
        raise StorageError(f"storage={url!r} names no file; use sqlite:///FILE.db (or :memory: for no file)")
    return path


def open_storage(
    url: str | None = None, heartbeat: int | None = None, *, read_only: bool = False
) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url`` (see the module docstring for the forms accepted); with
    ``heartbeat`` seconds, relational storages fail trials of silent tuning processes. ``read_only``
    storages are never created or written (a missing file is a :class:`StorageError`)."""
    url = storage_url(url)
    with shutdown.held():  # nor is an opening cut in two (tables half created, a journal half read)
        return uninterrupted(_open(url, heartbeat, read_only))


def _open(url: str, heartbeat: int | None, read_only: bool) -> optuna.storages.BaseStorage:
    if url == ":memory:":
        return optuna.storages.InMemoryStorage()
    if url.startswith("journal:"):
        from tilesearch.journal import Journal

        return optuna.storages.JournalStorage(Journal(url.removeprefix("journal:"), read_only=read_only))
    check_url(url, read_only)
    try:
        return rdb_storage(url, heartbeat, read_only=read_only)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds
        raise StorageError(f"cannot open storage {url!r}: {root_cause(exc)}") from None


def check_url(url: str, read_only: bool = False) -> None:
    """The checks of a relational storage's ``url`` that need no connection nor SQLAlchemy (its
    form; an SQLite file's kind and permissions), as :func:`open_storage` makes them first: ``tune``
    makes them before it starts the compile pool's process, which imports while the storage opens."""
    if url == ":memory:" or url.startswith("journal:"):
        return
    if "://" not in url:
        raise StorageError(f"storage={url!r} is not a storage URL; {FORMS}")
    path = sqlite_path(url)
    if path is not None:
        _check_sqlite_file(path, read_only)


def _check_sqlite_file(path: str, read_only: bool) -> None:
    if os.path.isdir(path):
        raise StorageError(f"{path} is a directory; name a database file, e.g. sqlite:///{path}/tune.db")
    if not os.path.exists(path):
        if read_only:
            raise MissingStorageError(f"no database at {path}; run tilesearch tune first (or pass storage=URL)")
        # A writer names where its database goes, as a journal file or --out does: make the folder.
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return
    if not os.access(path, os.R_OK):
        raise StorageError(f"database {path} is not readable; check its permissions")
    if not read_only and not os.access(path, os.W_OK):
        raise StorageError(f"database {path} is not writable; check its permissions (reading it needs none: show)")
    with open(path, "rb") as f:
        head = f.read(16)
    if head and head != b"SQLite format 3\x00":
        raise StorageError(f"{path} is not an SQLite database")


def check_study_name(name: str) -> str | None:
    """Why ``name`` cannot name a study, or ``None``: empty, too long for a database server's
    column, or holding ``#``, which marks tilesearch's own side studies."""
    if not name or not name.strip():
        return "study= is empty; give a name or leave study out for the default"
    if RESERVED in name:
        return f"study={name!r} contains {RESERVED!r}, which is reserved for tilesearch's side studies (<study>#claims)"
    if len(name) > MAX_STUDY_NAME:
        return f"study name has {len(name)} characters; at most {MAX_STUDY_NAME} fit a database server's column"
    return None


def study_name(problem: Problem, target: Target, identity: Mapping[str, Any], runtime: Sequence[str] = ()) -> str:
    """``gemm[m=8192,n=8192,k=8192,dtype=float16,layout=nn]@NVIDIA H100 80GB HBM3/sm_90a/tilelang-0.1.15/id-…``:
    the default name of a study measured under ``identity`` (:mod:`tilesearch.provenance`); a
    study of kernels compiled with ``runtime`` parameters as run-time values (a range's sizes)
    ends ``/runtime=m``: its figures are another kernel's than the one compiled for the problem."""
    suffix = f"/{RUNTIME_ATTR}={','.join(runtime)}" if runtime else ""
    return f"{problem.op}[{problem.key}]@{target.gpu}/{target.arch}/{versions.tag()}/{tag(identity)}{suffix}"


RUNTIME_ATTR = "runtime"
"""Study attribute: the problem parameters its kernels take at run time (``["m"]``), absent for
kernels compiled for the problem. :func:`find_studies` keeps the two apart."""


@dataclass(frozen=True)
class TrialRecord(Figures):
    """One trial as read back from the database: its :class:`~tilesearch.records.Figures` (``None``
    where the trial has none), compile and measure times, and every user attribute in ``attrs``."""

    number: int
    key: str
    config: dict[str, Any]
    status: str
    error: str | None = None
    compile_s: float | None = None
    measure_s: float | None = None
    replayed: bool = False
    duplicate_of: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        a = trial.user_attrs
        status = a.get("status") or _STATE_STATUS.get(trial.state, "unknown")
        return cls(
            number=trial.number,
            key=a.get("key", ""),
            config=json.loads(a["config"]) if "config" in a else {},
            status=status,
            replayed=bool(a.get("replayed", False)),
            duplicate_of=a.get("duplicate_of"),
            attrs=dict(a),
            **{n: a.get(n) for n in RECORD_FIGURES},
        )


RECORD_FIGURES = (*FIGURES, "error", "compile_s", "measure_s")  # read back by name from a trial's attributes


def _other_gpu(existing: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    """A line if the study was measured on another GPU than ``info``'s. The identity leaves the
    GPU out because the default study name has it; a study named explicitly (a recording resumed
    on whatever card a session is lent) would otherwise take an H100's rows into an H200's study."""
    old, new = (d.get("target", {}).get("gpu") if isinstance(d.get("target"), Mapping) else None
                for d in (existing, info))
    return [f"GPU: {old} -> {new}"] if old and new and old != new else []


class TuningDatabase:
    """The trials of one problem on one target, in an Optuna study.

    Args:
        storage: storage URL or an Optuna storage object.
        name: study name (see :func:`study_name`).
        heartbeat: seconds between liveness heartbeats of running trials, for a storage given
            by URL (see :mod:`tilesearch.storage`); ``None`` or 0: none.
        sampler: the Optuna sampler that ``study.ask`` uses (from the strategy).
        info: study-level facts to keep (op, problem, GPU, versions); written once.
    """

    def __init__(
        self,
        storage: str | optuna.storages.BaseStorage | None,
        name: str,
        *,
        sampler: optuna.samplers.BaseSampler | None = None,
        info: Mapping[str, Any] | None = None,
        heartbeat: int | None = None,
        read_only: bool = False,
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if not read_only and (reason := check_study_name(name)):
            raise StorageError(reason)
        self._owned = not isinstance(storage, optuna.storages.BaseStorage)
        self._host = socket.gethostname()
        # The trials this object opened, by number: it records them through these, never by
        # looking a number up. A number can name two trials of a study that an older tilesearch
        # damaged (a signal inside a storage call, see tilesearch.shutdown); looked up, it failed
        # every later run with "Multiple rows were found when one or none was required".
        self._opened: dict[int, optuna.Trial] = {}
        self._read: dict[int, TrialRecord] = {}  # finished trials' records, by trial id (see record_of)
        if isinstance(storage, optuna.storages.BaseStorage):
            self.storage = storage
        else:
            self.storage = open_storage(storage, heartbeat, read_only=read_only)
        if read_only:
            try:
                self.study = optuna.load_study(storage=self.storage, study_name=name, sampler=sampler)
            except KeyError:
                raise StorageError(f"no study {name!r} in the storage") from None
            return
        self.study = optuna.create_study(
            storage=self.storage, study_name=name, direction="minimize", sampler=sampler, load_if_exists=True
        )
        existing = self.study.user_attrs
        # a study with no attributes at all is being created right now (by us, or by another
        # tuning process of the same study): its creator writes the identity first, below
        fresh = not existing
        differ = (differences(existing.get(IDENTITY_ATTR), info[IDENTITY_ATTR])
                  if info and IDENTITY_ATTR in info and not fresh else [])
        differ += _other_gpu(existing, info or {})
        if differ:
            if not self.trials():  # nothing measured under the old conditions: take the new ones
                existing = {}
            else:
                raise StaleStudyError(
                    f"study {name!r} was measured under other conditions ({'; '.join(differ)}); its trials "
                    "are not reused: run tilesearch revalidate with the same op and problem (study=OLD) "
                    "to compare them under the current ones, or pass another study=NAME"
                )
        for key, value in sorted((info or {}).items(), key=lambda item: item[0] != IDENTITY_ATTR):
            if key not in existing:
                self.study.set_user_attr(key, value)

    @property
    def name(self) -> str:
        return self.study.study_name

    def close(self) -> None:
        """Closes the connections of a storage this object opened, so that SQLite checkpoints its
        write-ahead log into the file and removes ``-wal``/``-shm`` now, not at garbage collection."""
        if self._owned and isinstance(self.storage, optuna.storages.RDBStorage):
            self.storage.remove_session()
            self.storage.engine.dispose()

    def trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def records(self) -> list[TrialRecord]:
        return self._records(self.trials())

    def _records(self, trials: list[FrozenTrial]) -> list[TrialRecord]:
        """The records of ``trials`` that tilesearch wrote (they have a key)."""
        return [self.record_of(t) for t in trials if "key" in t.user_attrs]

    def record_of(self, trial: FrozenTrial) -> TrialRecord:
        """``trial``'s record, a finished trial's converted once. Why: the tuning loop reads the
        records several times a trial (the strategy's training, the claim, ``taken``, ``planned``),
        so converting every trial again made a tune quadratic: 216,000 conversions, 11 s of a 32 s
        replay tune of 293 trials. A finished trial cannot change (Optuna refuses to write to it),
        so its record is kept; callers must not change the records' dicts."""
        record = self._read.get(trial._trial_id)
        if record is None:
            record = TrialRecord.from_trial(trial)
            if trial.state.is_finished():
                self._read[trial._trial_id] = record
        return record

    def finished(self) -> dict[str, TrialRecord]:
        """Key -> first record that settles the configuration (:func:`~tilesearch.records.is_settled`:
        a result, or pruned, or not recorded; not interrupted, not a copy or a skip)."""
        return _settled(self._records(self.trials()))

    def in_flight(self) -> dict[str, int]:
        """Key -> number of the running trial measuring it."""
        return _running(self.trials())

    def planned(self) -> int:
        """Distinct configurations with a result or being measured now, by any tuning process of
        the study: what the trial budget counts."""
        trials = self.trials()  # one read of the storage: the tuning loop asks before every launch
        done = {k for k, r in _settled(self._records(trials)).items() if has_result(r)}
        return len(done | set(_running(trials)))

    def taken(self, key: str, number: int | None = None, trials: list[FrozenTrial] | None = None) -> int | None:
        """The trial that settled configuration ``key``, else the one measuring it now (not trial
        ``number``), else None; from one read of the storage, or from ``trials`` read before."""
        trials = self.trials() if trials is None else trials
        prior = _settled(self._records(trials)).get(key)
        if prior is not None:
            return prior.number
        # trial ``number`` itself left out first: it may carry ``key`` already (a claim's read), and
        # would hide an older running trial of the same configuration
        return _running([t for t in trials if t.number != number]).get(key)

    def evaluated(self) -> int:
        """Distinct configurations with a result (:func:`~tilesearch.records.has_result`): what
        the trial budget counts; pruned ones do not."""
        return sum(1 for r in self.finished().values() if has_result(r))

    def best(self, n: int = 10) -> list[TrialRecord]:
        """The ``n`` fastest correct configurations: those of the final re-time first, in its
        order (see :meth:`final`), then the others by their figures in the search
        (:func:`~tilesearch.records.speeds`: the ratio to the baseline where every one has it)."""
        ok = [r for r in self.finished().values() if is_correct(r)]
        final = self.final()
        rank = {e.trial: i for i, e in enumerate(final.entries) if e.result.status == Status.OK} if final else {}
        speed = dict(zip((r.number for r in ok), speeds(ok)))
        return sorted(ok, key=lambda r: (rank.get(r.number, len(rank)), -speed[r.number], r.latency_ms))[:n]

    def final(self) -> Final | None:
        """The last final re-time (:mod:`tilesearch.runner.retime`), or ``None`` if there is none
        or configurations were measured after it (it no longer covers the study's best)."""
        saved = self.study.user_attrs.get(FINAL_ATTR)
        if not saved or saved.get("evaluated") != self.evaluated():
            return None
        return Final.from_dict(saved["final"])

    def set_final(self, final: Final) -> None:
        self.study.set_user_attr(FINAL_ATTR, {"final": final.to_dict(), "evaluated": self.evaluated()})

    def fail_stale(self) -> int:
        """Marks this host's running trials whose process is gone as interrupted, and, on a storage
        with heartbeats, fails any tuning process's trials whose heartbeat stopped; returns how many
        trials of this host it marked. A trial still without a PID ``ABANDONED_S`` after it
        opened (a tuning process of an older version died in between) is marked too, and so is a WAITING
        trial, which only older versions queued and which nothing pops any more."""
        with warnings.catch_warnings():  # no-op without heartbeats; marked experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)
        count = 0
        # Read from the storage itself, not the study's cache, which keys trials by number and so
        # shows one of two trials that share a number (a study damaged by an older tilesearch)
        open_ = (TrialState.RUNNING, TrialState.WAITING)
        for trial in self.storage.get_all_trials(self.study._study_id, deepcopy=False, states=open_):
            if trial.state == TrialState.WAITING:  # study.tell refuses a trial that never ran
                self.storage.set_trial_user_attr(trial._trial_id, "status", Status.SKIPPED.value)
                self.storage.set_trial_user_attr(trial._trial_id, "error", "queued by an older tilesearch, never opened")
                self.storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
                continue
            if trial.state != TrialState.RUNNING:
                continue
            if self.owner_alive(trial) is not False and not _abandoned(trial):
                continue
            self._tell(trial, Status.INTERRUPTED, {"error": "the tuning process ended before this trial"})
            count += 1
        return count

    def live_in_flight(self, exclude: Iterable[int] = ()) -> int:
        """Running trials, less ``exclude``, whose tuning process may be alive: this host's by their PID;
        another host's only if the storage keeps heartbeats (which would fail them once dead)."""
        skip = set(exclude)
        remote = heartbeat.interval(self.storage) is not None
        count = 0
        for trial in self.trials():
            if trial.state != TrialState.RUNNING or "key" not in trial.user_attrs or trial.number in skip:
                continue
            alive = self.owner_alive(trial)
            count += alive if alive is not None else remote
        return count

    def owner_alive(self, trial: FrozenTrial) -> bool | None:
        """Whether the process that opened ``trial`` lives: known for this host's trials (by PID;
        a trial whose PID is not written yet counts as alive), ``None`` for another host's."""
        a = trial.user_attrs
        if a.get("host") != self._host:
            return None
        return "pid" not in a or _pid_alive(a["pid"])

    def ask(self, distributions: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> optuna.Trial:
        """Opens a trial: the strategy's sampler picks its parameters, or ``params`` fixes them.

        The trial is created RUNNING with its owner (PID, host) and any fixed parameters in one
        storage write, where ``study.enqueue_trial`` + ``study.ask`` would take several: a process
        killed in between left a WAITING trial that nothing pops, or a trial without an owner,
        and another tuning process's ``ask`` could pop this one's enqueued configuration."""
        fixed = dict(params or {})
        template = FrozenTrial(
            number=-1, state=TrialState.RUNNING, value=None, datetime_start=datetime.datetime.now(),
            datetime_complete=None, params=fixed, distributions={k: distributions[k] for k in fixed},
            user_attrs={"pid": os.getpid(), "host": self._host}, system_attrs={}, intermediate_values={},
            trial_id=-1,
        )
        trial_id = self.storage.create_new_trial(self.study._study_id, template_trial=template)
        self.study._thread_local.cached_all_trials = None  # the sampler must see the latest trials (as study.ask)
        trial = optuna.Trial(self.study, trial_id)
        for name, distribution in distributions.items():
            if name not in fixed:
                trial._suggest(name, distribution)  # what study.ask(fixed_distributions) does
        self._opened[trial.number] = trial
        return trial

    def claim(self, trial: optuna.Trial, candidate: Candidate) -> None:
        """Marks an open trial as measuring ``candidate``."""
        attrs = {"key": candidate.key, "config": json.dumps(candidate.config, sort_keys=True)}
        set_trial_user_attrs(self.storage, trial._trial_id, attrs)
        trial._cached_frozen_trial.user_attrs.update(attrs)  # what trial.set_user_attr keeps (trial.user_attrs)

    def record_invalid(
        self, trial: optuna.Trial, candidate: Candidate, reason: str, duplicate_of: int | None = None
    ) -> None:
        """Records a configuration pruned before compiling (or, with ``duplicate_of``, skipped
        because that trial is measuring it now)."""
        self.claim(trial, candidate)
        fields: dict[str, Any] = {"error": reason}
        if duplicate_of is not None:
            fields["duplicate_of"] = duplicate_of
        self._tell(trial, Status.INVALID, fields)

    def record_skipped(
        self, trial: optuna.Trial, candidate: Candidate, reason: str, duplicate_of: int | None = None
    ) -> None:
        """Closes a trial that measures nothing: its configuration is measured or in flight in
        trial ``duplicate_of``, or the budget is taken. FAIL, with status ``skipped`` (see the
        module docstring for why not PRUNED or a COMPLETE copy)."""
        self.claim(trial, candidate)
        fields: dict[str, Any] = {"error": reason}
        if duplicate_of is not None:
            fields["duplicate_of"] = duplicate_of
        self._tell(trial, Status.SKIPPED, fields)

    def record(self, trial: optuna.Trial | int, build: BuildResult, run: RunResult | None) -> None:
        """Stores the outcome of one candidate: a failed build, or the runner's result."""
        fields: dict[str, Any] = {"compile_s": build.compile_s}
        if not build.ok:
            status = Status.COMPILE_TIMEOUT if build.timed_out else Status.COMPILE_ERROR
            fields["error"] = build.error
        else:
            assert run is not None
            status = run.status
            data = run.to_dict()
            data.pop("status")
            extra = data.pop("extra") or {}
            fields.update({k: v for k, v in data.items() if v is not None})
            fields.update(extra)
        self._tell(trial, status, fields)

    def interrupt(self, numbers: Iterable[int]) -> None:
        for number in numbers:
            self._tell(number, Status.INTERRUPTED, {"error": "interrupted before the trial finished"})

    def _tell(self, trial: optuna.Trial | FrozenTrial | int, status: Status, fields: Mapping[str, Any]) -> None:
        """Records ``status`` and ``fields`` on ``trial`` and ends it. A number names a trial this
        object opened; any other is looked up (see ``_opened`` for why not first)."""
        if isinstance(trial, int):
            trial = self._opened[trial] if trial in self._opened else self.storage.get_trial(
                self.storage.get_trial_id_from_study_id_trial_number(self.study._study_id, trial))
        try:
            self._write(trial, status, fields)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            # another tuning process failed the trial meanwhile (its heartbeat lapsed): that record stands
            if self.storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
                raise

    def _write(self, trial: optuna.Trial | FrozenTrial, status: Status, fields: Mapping[str, Any]) -> None:
        trial_id = trial._trial_id
        attrs = {k: v[-4000:] if k == "error" and isinstance(v, str) else v for k, v in fields.items()}
        set_trial_user_attrs(self.storage, trial_id, {**attrs, "status": status.value})
        state = {Status.OK: TrialState.COMPLETE, Status.INVALID: TrialState.PRUNED}.get(status, TrialState.FAIL)
        value = fields["latency_ms"] if status == Status.OK else None
        if isinstance(trial, optuna.Trial) and value is not None:  # ours: the study's sampler sees it end
            self.study.tell(trial, value)
        elif isinstance(trial, optuna.Trial):
            self.study.tell(trial, state=state)
        else:  # a dead process's: its sampler is gone
            self.storage.set_trial_state_values(trial_id, state, None if value is None else [value])


def _abandoned(trial: FrozenTrial) -> bool:
    if "pid" in trial.user_attrs or trial.datetime_start is None:
        return False
    started = trial.datetime_start
    now = datetime.datetime.now(started.tzinfo)
    return (now - started).total_seconds() > ABANDONED_S


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def studies(storage: optuna.storages.BaseStorage) -> list[optuna.study.FrozenStudy]:
    """Every study of ``storage`` with its name and attributes, without its trials.

    ``optuna.study.get_all_study_summaries`` reads every trial of every study as well (for their
    count and start time, which nothing here looks at): 1.4 s on a range's storage of 81 studies
    and 2,136 trials, against 0.02 s for this. A range asks several times per size, and a resumed
    14336x4096 range on an H200 spent 6-9 s on each of its finished sizes and 2-3 s on each
    finished probe (2026-11-28), three of a device call's nine minutes, before measuring anything."""
    return storage.get_all_studies()


@dataclass
class _Read:
    """What this process has read of one study: its trials by id, those not yet finished, and
    the last finished trial's id (after which every trial is new)."""

    trials: dict[int, FrozenTrial] = field(default_factory=dict)
    unfinished: set[int] = field(default_factory=set)
    last_finished: int = -1


_READS: dict[tuple[str, str, int, str], _Read] = {}
_READS_LOCK = threading.Lock()


def study_trials(storage: optuna.storages.BaseStorage, study: optuna.study.FrozenStudy) -> list[FrozenTrial]:
    """Every trial of ``study`` (one of :func:`studies`), in number order, not to be changed.

    Why: the ``xgb`` strategy learns from every other study of its op in the storage, so each
    ``tune`` read all their trials, and a range runs some 50 of them in one process: 1.2 s a
    ``tune`` at the end of a 4096x4096 range (89 studies, 1,800 trials; this 2-core machine), most
    of it the database read. A relational storage is read as Optuna's own ``_CachedStorage``
    reads it (the storage's ``_get_trials``): a trial that has finished cannot change (Optuna
    refuses to write to it), so this process keeps it and asks again only for the trials it saw
    running and those after the last finished one, about 1.5 ms a study against 12.6 ms. Other
    storages (a journal, which replays its log in memory anyway; ``:memory:``) are read whole.
    As with Optuna's cache, a trial that another process opened before, and committed after, one
    that finished and was read here is never seen (a database server, not SQLite, which commits
    in turn): what learns from these trials can do without it."""
    url = getattr(storage, "url", None)
    if not isinstance(url, str) or ":memory:" in url or not hasattr(storage, "_get_trials"):
        return storage.get_all_trials(study._study_id, deepcopy=False)
    key = (url, os.getcwd(), study._study_id, study.study_name)  # a relative sqlite:/// names a file in the cwd
    with _READS_LOCK:
        read = _READS.setdefault(key, _Read())
        for trial in storage._get_trials(study._study_id, None, set(read.unfinished), read.last_finished):
            read.trials[trial._trial_id] = trial
            if trial.state.is_finished():
                read.unfinished.discard(trial._trial_id)
                read.last_finished = max(read.last_finished, trial._trial_id)
            else:
                read.unfinished.add(trial._trial_id)
        return sorted(read.trials.values(), key=lambda trial: trial.number)


def find_studies(
    storage: str | optuna.storages.BaseStorage | None, op: str, problem: Problem | None = None, *,
    retimed: bool = False, runtime: Sequence[str] = (),
) -> list[str]:
    """Names of the studies in ``storage`` for ``op`` (and ``problem``, if given), any GPU, of
    kernels with the ``runtime`` parameters (:data:`RUNTIME_ATTR`; none: compiled for the
    problem); with ``retimed``, only those with a final re-time, whether or not it still covers
    them (see :meth:`TuningDatabase.final`); a storage given by URL is opened read-only."""
    if not isinstance(storage, optuna.storages.BaseStorage):
        storage = open_storage(storage, read_only=True)
    names = []
    for summary in studies(storage):
        attrs = summary.user_attrs
        if attrs.get("op") != op or RESERVED in summary.study_name:
            continue
        if problem is not None and attrs.get("problem") != problem.key:
            continue
        if retimed and FINAL_ATTR not in attrs:
            continue
        if list(attrs.get(RUNTIME_ATTR, [])) != list(runtime):
            continue
        names.append(summary.study_name)
    return names


def hold_out(storage: str | None, op: str, problems: Iterable[str], range_key: str) -> None:
    """Marks the studies of ``op`` for the problem keys ``problems`` as held out for the range
    ``range_key`` (:data:`HELDOUT_ATTR`)."""
    wanted = set(problems)
    if not wanted:
        return
    storage_ = open_storage(storage)
    for summary in studies(storage_):
        attrs = summary.user_attrs
        if (attrs.get("op") == op and attrs.get("problem") in wanted and RESERVED not in summary.study_name
                and attrs.get(HELDOUT_ATTR) != range_key):
            storage_.set_study_user_attr(storage_.get_study_id_from_name(summary.study_name), HELDOUT_ATTR, range_key)


def studies_of(
    storage: optuna.storages.BaseStorage, op: str, problem: Problem, study: str | None = None, where: str = "the storage"
) -> list[str]:
    """``[study]`` if it is in ``storage``, or with no ``study`` the studies of ``problem`` (any
    GPU); :class:`NoStudyError`, saying which and naming ``where``, if there is none."""
    if study is not None:
        if study not in optuna.study.get_all_study_names(storage):
            raise NoStudyError(f"no study named {study!r} in {where}")
        return [study]
    names = find_studies(storage, op, problem)
    if not names:
        raise NoStudyError(f"no study for {op} {problem.key} in {where}; run tilesearch tune first")
    return names


def _settled(records: list[TrialRecord]) -> dict[str, TrialRecord]:
    done: dict[str, TrialRecord] = {}
    for rec in records:
        if is_settled(rec):
            done.setdefault(rec.key, rec)
    return done


def _running(trials: list[FrozenTrial]) -> dict[str, int]:
    return {t.user_attrs["key"]: t.number for t in trials if t.state == TrialState.RUNNING and "key" in t.user_attrs}
