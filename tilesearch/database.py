"""The tuning database: every trial of a search, kept in an Optuna study.

Any Optuna storage works: ``sqlite:///tilesearch.db`` (the default, no server), a
``postgresql://`` URL, ``journal:FILE`` for several processes on one host, or ``:memory:``. A
study holds one problem on one GPU with one TileLang version; its trials carry the configuration,
its content key, the status and error, and every measured figure as user attributes. A
configuration whose key already has a finished trial is never measured again, so running the
same command twice resumes.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tilesearch.op import Problem
from tilesearch.records import BuildResult, Candidate, RunResult, Status
from tilesearch.target import Target

DEFAULT_STORAGE = "sqlite:///tilesearch.db"
_UNFINISHED = {Status.INTERRUPTED.value}


class StorageError(ValueError):
    """A storage URL that no Optuna storage accepts."""


def storage_url(url: str | None = None) -> str:
    """The storage to use: ``url``, else ``$TILESEARCH_STORAGE``, else the SQLite default."""
    return url or os.environ.get("TILESEARCH_STORAGE") or DEFAULT_STORAGE


def open_storage(url: str | None = None) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url`` (see the module docstring for the forms accepted)."""
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
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}
    try:
        return optuna.storages.RDBStorage(url, **kwargs)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds
        raise StorageError(f"cannot open storage {url!r}: {str(exc).splitlines()[0]}") from None


def study_name(problem: Problem, target: Target, tag: str) -> str:
    """``gemm[m=8192,n=8192,k=8192,dtype=float16,layout=nn]@NVIDIA H100 80GB HBM3/sm_90a/tilelang-0.1.15``."""
    return f"{problem.op}[{problem.key}]@{target.gpu}/{target.arch}/{tag}"


@dataclass(frozen=True)
class TrialRecord:
    """One trial as read back from the database."""

    number: int
    key: str
    config: dict[str, Any]
    status: str
    error: str | None = None
    latency_ms: float | None = None
    tflops: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    rel_err: float | None = None
    compile_s: float | None = None
    measure_s: float | None = None
    replayed: bool = False
    duplicate_of: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        a = trial.user_attrs
        names = ("error", "latency_ms", "tflops", "baseline_ms", "speedup", "rel_err", "compile_s", "measure_s")
        status = a.get("status") or ("running" if trial.state == TrialState.RUNNING else "unknown")
        return cls(
            number=trial.number,
            key=a.get("key", ""),
            config=json.loads(a["config"]) if "config" in a else {},
            status=status,
            replayed=bool(a.get("replayed", False)),
            duplicate_of=a.get("duplicate_of"),
            attrs=dict(a),
            **{n: a.get(n) for n in names},
        )


class TuningDatabase:
    """The trials of one problem on one target, in an Optuna study.

    Args:
        storage: storage URL or an Optuna storage object.
        name: study name (see :func:`study_name`).
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
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.storage = storage if isinstance(storage, optuna.storages.BaseStorage) else open_storage(storage)
        self.study = optuna.create_study(
            storage=self.storage, study_name=name, direction="minimize", sampler=sampler, load_if_exists=True
        )
        existing = self.study.user_attrs
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

    def evaluated(self) -> int:
        """Distinct configurations compiled (or tried) so far: pruned ones do not count."""
        return sum(1 for r in self.finished().values() if r.status != Status.INVALID.value)

    def best(self, n: int = 10) -> list[TrialRecord]:
        """The ``n`` fastest correct configurations."""
        ok = [r for r in self.finished().values() if r.status == Status.OK.value and r.latency_ms is not None]
        return sorted(ok, key=lambda r: r.latency_ms)[:n]

    def fail_stale(self) -> int:
        """Marks this host's running trials whose process is gone as interrupted; returns how many."""
        count = 0
        for trial in self.trials():
            a = trial.user_attrs
            if trial.state != TrialState.RUNNING or a.get("host") != self._host:
                continue
            if _pid_alive(a.get("pid")):
                continue
            self._tell(trial.number, Status.INTERRUPTED, {"error": "the tuning process ended before this trial"})
            count += 1
        return count

    def ask(self, distributions: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> optuna.Trial:
        """Opens a trial: the strategy's sampler picks its parameters, or ``params`` fixes them."""
        if params is not None:
            self.study.enqueue_trial(dict(params), skip_if_exists=False)
        trial = self.study.ask(dict(distributions))
        trial.set_user_attr("host", self._host)
        trial.set_user_attr("pid", os.getpid())
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
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(self.study._study_id, number)
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


def find_studies(storage: str | None, op: str, problem: Problem | None = None) -> list[str]:
    """Names of the studies in ``storage`` for ``op`` (and ``problem``, if given), any GPU."""
    names = []
    for summary in optuna.study.get_all_study_summaries(open_storage(storage), include_best_trial=False):
        attrs = summary.user_attrs
        if attrs.get("op") != op:
            continue
        if problem is not None and attrs.get("problem") != problem.key:
            continue
        names.append(summary.study_name)
    return names
