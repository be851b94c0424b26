"""The ``tilesearch`` command: ``tune``, ``show``, ``export`` and ``ops``, configured with ``key=value``.

Bad input exits with code 2 and one line saying what is wrong and what would be right; so does
any :class:`~tilesearch.errors.TilesearchError` (a damaged file, a storage that cannot be opened).
SIGINT and SIGTERM end every command with exit code 130 or 143 and one line (see
:mod:`tilesearch.shutdown`); the handlers are installed before anything heavy is imported.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from tilesearch import range_cli, shutdown  # both light: nothing heavy before main() installs the handlers

USAGE = """usage: tilesearch COMMAND [key=value ...]

commands:
  tune op=NAME PARAMS... [strategy=tpe trials=64 seed=0 storage=URL runner=local transfer=FILES ...]
                       a range (m=1..16384) tunes chosen sizes, makes buckets and certifies them
                       on held-out sizes [sizes=7 tolerance=0.01 heldout=8]; show and export
                       take the same range
                       search the op's knobs on the GPU and keep every trial
                       (runner=replay:FILE serves a recorded dataset instead of a GPU;
                       hints=carver tries TileLang Carver's recommendations first)
       [gpus=0,1 | workers=N]
                       one tuning process per GPU, all on one study
  worker op=NAME PARAMS... storage=URL [study=NAME ...]
                       one tuning process of a study shared with other processes or hosts
                       (storage=postgresql://..., sqlite:///FILE.db or journal:FILE)
  show op=NAME PARAMS... [top=10 storage=URL]
                       print the best configurations found for a problem
  export op=NAME PARAMS... out=DIR [storage=URL study=NAME arch=sm_90a]
                       compile the best correct configuration into a kernel artifact
                       that tilesearch.load(DIR) opens without compiling
  revalidate op=NAME PARAMS... [study=OLD storage=URL runner=local top=5 predicted=3 noise=0.02 search=16]
                       re-measure an old study's top and the cost model's predicted top under
                       the current conditions, search further where the winner changed or lost
                       more than the noise; exit code 1 when the tuned kernel regressed
  trials op=NAME PARAMS... [storage=URL study=NAME out=FILE.csv]
                       the study's trials as CSV, one row per configuration (stdout without out=)
  ops                  list operators with their parameters and knobs

example: tilesearch tune op=gemm m=4096 n=4096 k=4096 dtype=float16 strategy=tpe trials=64"""


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


POSITIVE = ("workers", "top")  # 0 makes no sense for these (TuneSettings checks its own fields)
NON_EMPTY = ("storage", "study", "runner", "strategy", "arch", "out", "op")


def parse_pairs(args: list[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise UsageError(f"expected key=value, got {arg!r} (e.g. m=4096)")
        if key in pairs:
            raise UsageError(f"{key} given twice")
        if key in NON_EMPTY and not value.strip():
            raise UsageError(f"{key}= is empty; give a value or leave {key} out for the default")
        pairs[key] = value
    return pairs


def coerce(name: str, raw: str, default: Any) -> Any:
    """``raw`` as the type of ``default`` (a bool from true/false, yes/no, 1/0, on/off; a finite,
    non-negative number), or :class:`UsageError`; a string default keeps ``raw``."""
    if isinstance(default, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{name}={raw!r} must be true or false")
    if isinstance(default, int | float):
        try:
            value = type(default)(raw)
        except ValueError:
            raise UsageError(f"{name}={raw!r} must be a {type(default).__name__}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise UsageError(f"{name}={raw} must be a finite number")
        if value < 0:
            raise UsageError(f"{name}={raw} must not be negative")
        if value == 0 and name in POSITIVE:
            raise UsageError(f"{name} must be at least 1, got {raw}")
        return value
    return raw


def split_settings(pairs: dict[str, str], allowed: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, str]]:
    """Setting keys converted to their types, and the rest (the op's parameters)."""
    from dataclasses import fields

    from tilesearch.tuner import TuneSettings

    defaults = {f.name: f.default for f in fields(TuneSettings)}
    settings, rest = {}, {}
    for key, raw in pairs.items():
        if key in allowed:
            settings[key] = coerce(key, raw, defaults.get(key, ""))
        else:
            rest[key] = raw
    return settings, rest


def _load_problem(pairs: dict[str, str], settings_keys: tuple[str, ...] = ()) -> tuple[Any, Any]:
    from tilesearch import registry
    from tilesearch.op import ProblemError

    if "op" not in pairs:
        raise UsageError(f"op=NAME is required; registered ops: {', '.join(sorted(registry.available()))}")
    try:
        op = registry.load(pairs.pop("op"))
        unknown = sorted(set(pairs) - {p.name for p in op.params})
        if unknown:
            known = ", ".join(p.name for p in op.params) + (", " + ", ".join(settings_keys) if settings_keys else "")
            raise UsageError(f"unknown key {unknown[0]!r}; {op.name} takes {known}")
        return op, op.problem(**pairs)
    except (registry.UnknownOperatorError, registry.OperatorError, ProblemError) as exc:
        raise UsageError(str(exc)) from None


def _gpus(pairs: dict[str, str]) -> list[int] | None:
    """Devices of ``gpus=0,1`` or ``workers=N`` (GPUs 0..N-1), one tuning process each (``workers``
    keeps its name for users' scripts); ``None`` for one tuning loop in this process."""
    raw_gpus, raw_workers = pairs.pop("gpus", None), pairs.pop("workers", None)
    workers = int(coerce("workers", raw_workers, 1)) if raw_workers is not None else None
    if raw_gpus is None:
        return list(range(workers)) if workers and workers > 1 else None
    try:
        gpus = [int(g) for g in raw_gpus.split(",") if g.strip()]
    except ValueError:
        raise UsageError(f"gpus={raw_gpus!r} must list device indices, e.g. gpus=0,1") from None
    if not gpus or len(set(gpus)) != len(gpus) or min(gpus) < 0:
        raise UsageError(f"gpus={raw_gpus!r} must list distinct device indices, e.g. gpus=0,1")
    if workers is not None and workers != len(gpus):
        raise UsageError(f"workers={workers} but gpus={raw_gpus} names {len(gpus)}: one tuning process per GPU")
    return gpus


def cmd_worker(args: list[str]) -> int:
    """``tilesearch worker``: one tuning process of a shared study (the command keeps its name)."""
    from tilesearch.database import storage_url

    pairs = parse_pairs(args)
    if "storage" not in pairs or storage_url(pairs["storage"]) == ":memory:":
        raise UsageError("worker needs storage=URL shared with the other tuning processes, e.g. storage=postgresql://...")
    if "gpus" in pairs or "workers" in pairs:
        raise UsageError("worker is one tuning process on one GPU (device=N); use tune gpus=0,1 for several")
    return cmd_tune(args)


def cmd_tune(args: list[str]) -> int:
    from tilesearch import report, strategy
    from tilesearch.builder import compiler
    from tilesearch.builder.local import start_early
    from tilesearch.database import StorageError, check_url, open_storage, storage_url
    from tilesearch.dataset import DatasetError
    from tilesearch.errors import TilesearchError
    from tilesearch.provenance import StaleStudyError
    from tilesearch.runner import NoDeviceError, UnknownRunnerError
    from tilesearch.strategy import UnknownStrategyError
    from tilesearch.strategy.hints import HintError
    from tilesearch.tuner import TuneSettings, tune

    pairs = parse_pairs(args)
    if range_cli.has_range(pairs):
        return range_cli.tune(pairs, UsageError)
    gpus = _gpus(pairs)
    settings, rest = split_settings(pairs, TuneSettings.keys())
    op, problem = _load_problem(dict(rest), settings_keys=TuneSettings.keys())
    TuneSettings(**settings)  # bad values fail here, before anything starts
    compiler.describe()  # as does a compiler this machine cannot run
    if settings.get("strategy", "tpe") not in strategy.STRATEGIES:
        raise UsageError(f"unknown strategy {settings['strategy']!r}; choose one of {', '.join(strategy.STRATEGIES)}")
    if "arch" in settings:
        _check_arch(settings["arch"])
    if gpus is not None:
        return _tune_parallel(rest["op"], problem, gpus, TuneSettings(**settings))
    url = storage_url(settings.get("storage"))
    created = _new_files(url)
    try:
        check_url(url)  # a bad URL or file fails here, before anything starts
        if TuneSettings(**settings).runner == "local":
            # the compile pool's TileLang import (seconds) begins while the storage opens (0.4-0.5 s
            # of SQLAlchemy and Alembic imports on the CPU machine), not after: the first kernel,
            # and so the first measured trial, waits on that import. Should the storage fail to
            # open after all (a server that does not answer), the unused fork server is stopped as
            # this process exits (tilesearch.workers.start_fork_server).
            start_early()
        open_storage(url)  # a bad URL fails here, before the GPU starts
        result = tune(op, problem, settings=TuneSettings(**settings))
    except NoDeviceError as exc:
        _remove_if_empty(created, url)
        raise UsageError(f"{exc}: tune measures on a CUDA GPU; run it on a machine with one") from None
    except (StorageError, DatasetError, UnknownRunnerError, UnknownStrategyError, HintError, StaleStudyError) as exc:
        _remove_if_empty(created, url)
        raise UsageError(str(exc)) from None
    except TilesearchError:
        _remove_if_empty(created, url)
        raise
    replay = " [replayed]" if result.replayed else ""
    print(f"study: {result.study}{replay}")
    if result.measured_now == 0 and not result.statuses:
        print(f"nothing to measure: the study already holds trials={settings.get('trials', 64)} configurations")
    print(f"gpu: {result.target.gpu} ({result.target.arch})")
    print(
        f"measured now: {result.measured_now} in {result.wall_s:.1f} s wall "
        f"({result.compile_s:.1f} s of compilation in the compile pool); statuses: {report.status_line(result.statuses)}"
    )
    if result.replayed:
        print("pipeline: replayed, nothing compiled or measured")
    elif result.measured_now:
        print(f"pipeline: {result.compile_per_min:.1f} configurations compiled per minute; "
              f"GPU idle {100 * result.gpu_idle:.0f}% of the wall time")
    if TuneSettings(**settings).verbose:
        from tilesearch import phases

        first = f"{result.first_result_s:.1f} s" if result.first_result_s is not None else "none"
        if result.first_result_s is not None and result.before_s is not None:
            first += f" ({result.before_s + result.first_result_s:.1f} s after the command started)"
        busy = f"{100 * result.busy_after_first:.0f}%" if result.busy_after_first is not None else "-"
        print(f"first measured trial after {first}; runner busy {busy} of the time after it")
        if result.measured_now:
            print(f"raced: {result.raced} of {result.measured_now} trials stopped being timed once clearly "
                  "slower than the best so far (their intervals are wider than +-1%)")
            if result.passed:
                print(f"passed: {result.passed} results recorded before an older trial's, whose compile "
                      "held the GPU up (launch order kept otherwise)")
        print(phases.table(result.phases, result.wall_s))
    for note in result.notes:
        print(f"note: {note}")
    if result.best:
        print(report.best_table(result.best))
    else:
        print("no correct configuration yet")
    if result.final is not None:
        print(report.final_table(result.final))
    return 0


def _check_arch(arch: str) -> None:
    from tilesearch.target import Target

    try:
        Target.from_arch(arch)
    except ValueError as exc:
        raise UsageError(f"arch={arch!r}: {exc}") from None


def _new_files(url: str) -> list[str]:
    """The files of storage ``url`` that do not exist yet (a run may create them)."""
    from tilesearch.database import sqlite_path

    path = url.removeprefix("journal:") if url.startswith("journal:") else sqlite_path(url)
    return [path] if path and not os.path.exists(path) else []


def _remove_if_empty(created: list[str], url: str) -> None:
    """Removes the storage files a failed ``tune`` created, if no trial made it into them, so that
    a run that failed before measuring leaves nothing behind."""
    import optuna

    from tilesearch.database import open_storage

    for path in created:
        if not os.path.exists(path):
            continue
        try:
            storage = open_storage(url, read_only=True)
            if any(storage.get_n_trials(s._study_id) for s in storage.get_all_studies()):
                continue
            if isinstance(storage, optuna.storages.RDBStorage):
                storage.engine.dispose()
        except Exception:  # noqa: BLE001 - a file we cannot read is left alone
            continue
        for leftover in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
            if os.path.exists(leftover):
                os.remove(leftover)


def _tune_parallel(op: str, problem: Any, gpus: list[int], settings: Any) -> int:
    from tilesearch import report
    from tilesearch.distributed import SharedStorageError, tune_parallel

    try:
        result = tune_parallel(op, problem.to_dict(), gpus=gpus, settings=settings)
    except SharedStorageError as exc:
        raise UsageError(str(exc)) from None
    for w in result.processes:
        if w.result is not None:
            line = f"measured {w.result.measured_now} in {w.result.wall_s:.1f} s"
            line += f" ({report.status_line(w.result.statuses)})"
        else:
            line = f"failed: {(w.error or '').splitlines()[0] if w.error else 'unknown'}"
        print(f"tuning process {w.index} (gpu {w.gpu}): {line}")
    if result.study is None:
        raise UsageError("no tuning process could start; see the errors above")
    print(f"study: {result.study}")
    print(f"measured now: {result.measured_now} in {result.wall_s:.1f} s wall; statuses: "
          f"{report.status_line(result.statuses)}")
    print(report.best_table(result.best) if result.best else "no correct configuration yet")
    return 0 if all(w.result is not None for w in result.processes) else 1


def cmd_show(args: list[str]) -> int:
    from collections import Counter

    from tilesearch import report
    from tilesearch.database import MissingStorageError, TuningDatabase, find_studies, open_storage
    from tilesearch.records import Status

    pairs = parse_pairs(args)
    if range_cli.has_range(pairs):
        return range_cli.show(pairs, UsageError)
    storage = pairs.pop("storage", None)
    top = int(coerce("top", pairs.pop("top", "10"), 10))
    op, problem = _load_problem(pairs, settings_keys=("storage", "top"))
    try:
        opened = open_storage(storage, read_only=True)  # show creates and writes nothing
    except MissingStorageError as exc:
        raise UsageError(f"no study for {op.name} {problem.key}: {exc}") from None
    names = find_studies(opened, op.name, problem)
    if not names:
        raise UsageError(f"no study for {op.name} {problem.key} in the storage; run tilesearch tune first")
    for name in names:
        db = TuningDatabase(opened, name, read_only=True)
        records = [r for r in db.records() if r.duplicate_of is None and r.status != Status.SKIPPED.value]
        counts = Counter(r.status for r in records)
        replay = " [replayed]" if db.study.user_attrs.get("replayed") else ""
        print(f"study: {name}{replay}")
        print(f"trials: {len(records)} ({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))})")
        best = db.best(top)
        print(report.best_table(best) if best else "no correct configuration yet")
        final = db.final()
        if final is not None:
            print(report.final_table(final))
        elif best:
            print("no final re-time covers the trials measured last: rerun tune to re-time the top configurations")
        print()
    return 0


def cmd_export(args: list[str]) -> int:
    from tilesearch.database import StorageError
    from tilesearch.deploy import ArtifactError, NoTrialError, export

    keys = ("out", "storage", "study", "arch")
    pairs = parse_pairs(args)
    if range_cli.has_range(pairs):
        return range_cli.export(pairs, UsageError)
    options = {key: pairs.pop(key) for key in keys if key in pairs}
    op, problem = _load_problem(pairs, settings_keys=keys)
    if not options.get("out"):
        raise UsageError("out=DIR is required: the directory to write the kernel artifact to")
    try:
        meta = export(op, problem, **options)
    except (NoTrialError, StorageError, ArtifactError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    speed = f", {meta.speedup:.2f}x the PyTorch baseline" if meta.speedup else ""
    note = " [synthetic figures, not measured]" if meta.synthetic else " [replayed]" if meta.replayed else ""
    print(f"exported {meta.op} {meta.problem_key} for {meta.arch} to {options['out']}")
    print(f"trial {meta.trial} of study {meta.study}: {meta.latency_ms:.4g} ms{speed}{note}")
    print(f"config: {', '.join(f'{k}={v}' for k, v in meta.config.items())}")
    print(f"kernel id: {meta.kernel_id}; load it with tilesearch.load({options['out']!r})")
    return 0


REVALIDATE_KEYS = {"study": "", "storage": "", "runner": "local", "top": 5, "predicted": 3, "noise": 0.02,
                   "search": 16, "strategy": "xgb", "seed": 0, "device": 0, "build_workers": 0, "run_timeout": 60.0}


def cmd_revalidate(args: list[str]) -> int:
    from tilesearch import report
    from tilesearch.database import StorageError
    from tilesearch.dataset import DatasetError
    from tilesearch.provenance import StaleStudyError
    from tilesearch.revalidate import RevalidateError, revalidate
    from tilesearch.runner import NoDeviceError, UnknownRunnerError

    pairs = parse_pairs(args)
    options = {k: coerce(k, pairs.pop(k), default) for k, default in REVALIDATE_KEYS.items() if k in pairs}
    op, problem = _load_problem(pairs, settings_keys=tuple(REVALIDATE_KEYS))
    try:
        out = revalidate(op, problem, **{k: v or None if k in ("study", "storage") else v for k, v in options.items()})
    except NoDeviceError as exc:
        raise UsageError(f"{exc}: revalidate measures on a CUDA GPU (or runner=replay:FILE)") from None
    except (RevalidateError, StorageError, DatasetError, UnknownRunnerError, StaleStudyError) as exc:
        raise UsageError(str(exc)) from None
    print(report.revalidation(out))
    return 1 if out.regressed else 0


def cmd_trials(args: list[str]) -> int:
    from tilesearch import trial_table
    from tilesearch.database import StorageError

    pairs = parse_pairs(args)
    options = {key: pairs.pop(key) for key in ("storage", "study", "out") if key in pairs}
    op, problem = _load_problem(pairs, settings_keys=("storage", "study", "out"))
    try:
        table = trial_table.trials(op.name, problem.to_dict(), storage=options.get("storage"),
                                   study=options.get("study"))
    except (trial_table.NoStudyError, StorageError) as exc:
        raise UsageError(str(exc)) from None
    if "out" in options:
        with open(options["out"], "w", encoding="utf-8", newline="") as f:
            trial_table.to_csv(table, f)
        print(f"wrote {len(table)} trials (one per configuration) to {options['out']}")
    else:
        trial_table.to_csv(table, sys.stdout)
    return 0


def cmd_ops(args: list[str]) -> int:
    from tilesearch import registry
    from tilesearch.target import Target

    if args:
        raise UsageError(f"ops takes no arguments, got {' '.join(args)}")
    for name in sorted(registry.available()):
        op = registry.load(name)
        print(f"{name}: {op.description}")
        for param in op.params:
            print(f"  param {param.describe()}" + (f" - {param.help}" if param.help else ""))
        example = op.problem(**{p.name: 1024 for p in op.params if p.default is None})
        space = op.space(example, Target.from_arch("sm_90a"))
        for knob, values in space.describe():
            print(f"  knob  {knob}: {values}")
        print(f"  space at {example.key} on sm_90a: {space.size} configurations, {space.count_valid()} valid")
    return 0


COMMANDS = {"tune": cmd_tune, "worker": cmd_worker, "show": cmd_show, "export": cmd_export,
            "revalidate": cmd_revalidate, "trials": cmd_trials, "ops": cmd_ops}


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code (2 for bad input, 130/143 when interrupted)."""
    shutdown.install()
    # SQLAlchemy logs its own tracebacks (say, closing a cursor after a signal) besides raising:
    # its errors reach us as exceptions, and the one line we print is what the user sees
    logging.getLogger("sqlalchemy").addHandler(logging.NullHandler())
    try:
        code = _run(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()
    except shutdown.Interrupted as exc:
        return _interrupted(exc.signum)
    except KeyboardInterrupt:
        return _interrupted(shutdown.received())
    except BrokenPipeError:
        # the reader went away (``| head``): say nothing more, and keep Python's exit-time flush quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        # a signal that landed inside a storage transaction can make the cleanup fail in turn
        if shutdown.received():
            return _interrupted(shutdown.received())
        raise
    if shutdown.received():  # the exception was swallowed (raised inside a finalizer): still interrupted
        return _interrupted(shutdown.received())
    return code


def _interrupted(signum: int | None) -> int:
    print("tilesearch: interrupted; finished trials are saved, rerun the command to resume", file=sys.stderr)
    return shutdown.exit_code(signum)


def _run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"tilesearch: error: unknown command {command!r}; use one of {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[command](rest)
    except UsageError as exc:
        return _error(str(exc))
    except Exception as exc:
        message = _user_error(exc)
        if message is None or shutdown.received():
            raise
        return _error(message)


def _error(message: str) -> int:
    print(f"tilesearch: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _user_error(exc: Exception) -> str | None:
    """The one line for an error the user can fix, or ``None`` for a bug (which keeps its traceback).

    Our own errors say what to do; a storage that fails mid-run (a database server stopped, a
    damaged file found late) is reported with what was kept."""
    from tilesearch.errors import TilesearchError, root_cause

    if isinstance(exc, TilesearchError):
        return str(exc)
    optuna = sys.modules.get("optuna")
    sqlalchemy = sys.modules.get("sqlalchemy")
    storage_errors: tuple[type, ...] = ()
    if optuna is not None:
        storage_errors += (optuna.exceptions.StorageInternalError,)
    if sqlalchemy is not None:
        storage_errors += (sqlalchemy.exc.SQLAlchemyError,)
    if storage_errors and isinstance(exc, storage_errors):
        return (f"the storage failed: {root_cause(exc)}; finished trials are kept: when the storage is back "
                "(or restored), rerun the command to resume")
    return None


if __name__ == "__main__":
    sys.exit(main())
