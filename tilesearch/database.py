"""The tuning database: every trial of a search, kept in an Optuna study.

Any Optuna storage works: ``sqlite:///tilesearch.db`` (the default, no server), a
``postgresql://`` URL, ``journal:FILE`` for several processes on one host, or ``:memory:``. A
study holds one problem on one GPU with one TileLang version; its trials carry the configuration,
its content key, the status and error, and every measured figure as user attributes. A
configuration whose key already has a finished trial is never measured again, so running the
same command twice resumes. Several processes may share a study (see :mod:`tilesearch.claim`
for how they avoid measuring a configuration twice, :mod:`tilesearch.storage` for the storages).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tilesearch import heartbeat
from tilesearch.op import Problem
from tilesearch.provenance import IDENTITY_ATTR, StaleStudyError, differences
from tilesearch.records import FIGURES, BuildResult, Candidate, Figures, Final, RunResult, Status
from tilesearch.storage import rdb_storage
from tilesearch.target import Target

DEFAULT_STORAGE = "sqlite:///tilesearch.db"
FINAL_ATTR = "final"  # study attribute: the last final re-time and the trial count it covered
ABANDONED_S = 600.0  # a worker writes its trial's PID right after opening it
_UNFINISHED = {Status.INTERRUPTED.value, "running", "waiting"}


# trials without a status attribute: still open, or failed by a heartbeat check (the worker died)
_STATE_STATUS = {
    TrialState.RUNNING: "running",
    TrialState.WAITING: "waiting",
    TrialState.FAIL: Status.INTERRUPTED.value,
}


class StorageError(ValueError):
    """A storage URL that no Optuna storage accepts."""


def storage_url(url: str | None = None) -> str:
    """The storage to use: ``url``, else ``$TILESEARCH_STORAGE``, else the SQLite default."""
    return url or os.environ.get("TILESEARCH_STORAGE") or DEFAULT_STORAGE


def open_storage(url: str | None = None, heartbeat: int | None = None) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url`` (see the module docstring for the forms accepted); with
    ``heartbeat`` seconds, relational storages fail and re-queue trials of silent workers."""
    url = storage_url(url)
    if url == ":memory:":
        return optuna.storages.InMemoryStorage()
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url.removeprefix("journal:")))
    if "://" not in url:
        raise StorageError(
            f"storage={url!r} is not a storage URL; use sqlite:///FILE.db, postgresql://USER@HOST/DB, "
            "journal:FILE or :memory:"
        )
    try:
        return rdb_storage(url, heartbeat)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds
        raise StorageError(f"cannot open storage {url!r}: {str(exc).splitlines()[0]}") from None


def study_name(problem: Problem, target: Target, tag: str) -> str:
    """``gemm[m=8192,n=8192,k=8192,dtype=float16,layout=nn]@NVIDIA H100 80GB HBM3/sm_90a/tilelang-0.1.15``."""
    return f"{problem.op}[{problem.key}]@{target.gpu}/{target.arch}/{tag}"


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
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if isinstance(storage, optuna.storages.BaseStorage):
            self.storage = storage
        else:
            self.storage = open_storage(storage, heartbeat)
        self.study = optuna.create_study(
            storage=self.storage, study_name=name, direction="minimize", sampler=sampler, load_if_exists=True
        )
        existing = self.study.user_attrs
        differ = differences(existing.get(IDENTITY_ATTR), info[IDENTITY_ATTR]) if info and IDENTITY_ATTR in info else []
        if differ:
            if not self.trials():  # nothing measured under the old conditions: take the new ones
                existing = {}
            else:
                raise StaleStudyError(
                    f"study {name!r} was measured under other conditions ({'; '.join(differ)}); its trials "
                    "are not reused: run tilesearch revalidate with the same op and problem (study=OLD) "
                    "to compare them under the current ones, or pass another study=NAME"
                )
        for key, value in (info or {}).items():
            if key not in existing:
                self.study.set_user_attr(key, value)
        self._host = socket.gethostname()

    @property
    def name(self) -> str:
        return self.study.study_name

    def trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def records(self) -> list[TrialRecord]:
        return [TrialRecord.from_trial(t) for t in self.trials() if "key" in t.user_attrs]

    def finished(self) -> dict[str, TrialRecord]:
        """Key -> first finished record (measured, failed or pruned; not interrupted, not a copy)."""
        done: dict[str, TrialRecord] = {}
        for rec in self.records():
            if rec.status in _UNFINISHED or rec.status == "running" or rec.duplicate_of is not None:
                continue
            done.setdefault(rec.key, rec)
        return done

    def in_flight(self) -> dict[str, int]:
        """Key -> number of the running trial measuring it."""
        return {
            t.user_attrs["key"]: t.number
            for t in self.trials()
            if t.state == TrialState.RUNNING and "key" in t.user_attrs
        }

    def planned(self) -> int:
        """Distinct configurations evaluated or being evaluated now, by any worker of the study."""
        done = {k for k, r in self.finished().items() if r.status != Status.INVALID.value}
        return len(done | set(self.in_flight()))

    def evaluated(self) -> int:
        """Distinct configurations compiled (or tried) so far: pruned ones do not count."""
        return sum(1 for r in self.finished().values() if r.status != Status.INVALID.value)

    def best(self, n: int = 10) -> list[TrialRecord]:
        """The ``n`` fastest correct configurations: those of the final re-time first, in its
        order (see :meth:`final`), then the others by their latency in the search."""
        ok = [r for r in self.finished().values() if r.status == Status.OK.value and r.latency_ms is not None]
        final = self.final()
        rank = {e.trial: i for i, e in enumerate(final.entries) if e.result.status == Status.OK} if final else {}
        return sorted(ok, key=lambda r: (rank.get(r.number, len(rank)), r.latency_ms))[:n]

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
        with heartbeats, fails (and re-queues) any worker's trials whose heartbeat stopped;
        returns how many trials of this host it marked. A trial still without a PID
        ``ABANDONED_S`` after it opened (its worker died in between) is marked too."""
        with warnings.catch_warnings():  # no-op without heartbeats; marked experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)
        count = 0
        for trial in self.trials():
            if trial.state != TrialState.RUNNING:
                continue
            if self.worker_alive(trial) is not False and not _abandoned(trial):
                continue
            self._tell(trial.number, Status.INTERRUPTED, {"error": "the tuning process ended before this trial"})
            count += 1
        return count

    def live_in_flight(self, exclude: Iterable[int] = ()) -> int:
        """Running trials, less ``exclude``, whose worker may be alive: this host's by their PID;
        another host's only if the storage keeps heartbeats (which would fail them once dead)."""
        skip = set(exclude)
        remote = heartbeat.interval(self.storage) is not None
        count = 0
        for trial in self.trials():
            if trial.state != TrialState.RUNNING or "key" not in trial.user_attrs or trial.number in skip:
                continue
            alive = self.worker_alive(trial)
            count += alive if alive is not None else remote
        return count

    def worker_alive(self, trial: FrozenTrial) -> bool | None:
        """Whether the process that opened ``trial`` lives: known for this host's trials (by PID;
        a trial whose PID is not written yet counts as alive), ``None`` for another host's."""
        a = trial.user_attrs
        if a.get("host") != self._host:
            return None
        return "pid" not in a or _pid_alive(a["pid"])

    def ask(self, distributions: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> optuna.Trial:
        """Opens a trial: the strategy's sampler picks its parameters, or ``params`` fixes them."""
        if params is not None:
            self.study.enqueue_trial(dict(params), skip_if_exists=False)
        with warnings.catch_warnings():  # heartbeats are recorded by tilesearch.heartbeat, not optimize()
            warnings.filterwarnings("ignore", "Heartbeat of storage")
            trial = self.study.ask(dict(distributions))
        trial.set_user_attr("pid", os.getpid())  # before host: fail_stale reads a host without pid as alive
        trial.set_user_attr("host", self._host)
        return trial

    def claim(self, trial: optuna.Trial, candidate: Candidate) -> None:
        """Marks an open trial as measuring ``candidate``."""
        trial.set_user_attr("key", candidate.key)
        trial.set_user_attr("config", json.dumps(candidate.config, sort_keys=True))

    def record_invalid(
        self, trial: optuna.Trial, candidate: Candidate, reason: str, duplicate_of: int | None = None
    ) -> None:
        """Records a configuration pruned before compiling (or, with ``duplicate_of``, skipped
        because that trial is measuring it now)."""
        self.claim(trial, candidate)
        fields: dict[str, Any] = {"error": reason}
        if duplicate_of is not None:
            fields["duplicate_of"] = duplicate_of
        self._tell(trial.number, Status.INVALID, fields)

    def record_duplicate(self, trial: optuna.Trial, candidate: Candidate, of: TrialRecord) -> None:
        """Answers a re-proposed configuration from its earlier record, measuring nothing."""
        self.claim(trial, candidate)
        fields = {k: v for k, v in of.attrs.items() if k not in ("host", "pid", "key", "config", "status")}
        fields["duplicate_of"] = of.number
        self._tell(trial.number, Status(of.status), fields)

    def record(self, trial: optuna.Trial | int, build: BuildResult, run: RunResult | None) -> None:
        """Stores the outcome of one candidate: a failed build, or the runner's result."""
        number = trial if isinstance(trial, int) else trial.number
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
        self._tell(number, status, fields)

    def interrupt(self, numbers: Iterable[int]) -> None:
        for number in numbers:
            self._tell(number, Status.INTERRUPTED, {"error": "interrupted before the trial finished"})

    def _tell(self, number: int, status: Status, fields: Mapping[str, Any]) -> None:
        try:
            self._write(number, status, fields)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            # another worker failed the trial meanwhile (its heartbeat lapsed): that record stands
            if self.storage.get_trial(self._trial_id(number)).state == TrialState.RUNNING:
                raise

    def _trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.study._study_id, number)

    def _write(self, number: int, status: Status, fields: Mapping[str, Any]) -> None:
        trial_id = self._trial_id(number)
        for key, value in fields.items():
            if key == "error" and isinstance(value, str):
                value = value[-4000:]
            self.storage.set_trial_user_attr(trial_id, key, value)
        self.storage.set_trial_user_attr(trial_id, "status", status.value)
        if status == Status.OK:
            self.study.tell(number, fields["latency_ms"])
        elif status == Status.INVALID:
            self.study.tell(number, state=TrialState.PRUNED)
        else:
            self.study.tell(number, state=TrialState.FAIL)


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


def find_studies(storage: str | optuna.storages.BaseStorage | None, op: str, problem: Problem | None = None) -> list[str]:
    """Names of the studies in ``storage`` (a URL or an open storage) for ``op`` (and ``problem``,
    if given), any GPU."""
    names = []
    opened = storage if isinstance(storage, optuna.storages.BaseStorage) else open_storage(storage)
    for summary in optuna.study.get_all_study_summaries(opened, include_best_trial=False):
        attrs = summary.user_attrs
        if attrs.get("op") != op:
            continue
        if problem is not None and attrs.get("problem") != problem.key:
            continue
        names.append(summary.study_name)
    return names
