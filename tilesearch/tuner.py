"""The tuning loop: strategy proposes -> builder compiles -> runner measures -> database records.

Compilation and measurement overlap: the builder keeps its compile pool busy with the next
proposals while the runner measures the kernels already compiled, one at a time. The runner
measures in a thread of its own that takes each kernel as it compiles (:mod:`tilesearch.runner.feed`),
so that the GPU times the next kernel while the tuning process records the last results and
proposes; the strategy still sees the results in launch order, each recorded before the
proposals that follow it, unless one slow compile holds the GPU up (:data:`PATIENCE`).

The runner gets, with each candidate, the best correct trial measured so far (its
:class:`~tilesearch.records.Incumbent`), so that it may stop timing a trial once it is clearly
slower (:mod:`tilesearch.runner.measure`, "Racing"). Once its measuring worker is up and the
study is open, it is told when a final re-time will follow, so that it can start that re-time's
fresh worker processes in the background while the first configurations compile
(:mod:`tilesearch.runner.local`, "Spare workers").

Several tuning processes (one per GPU, on one host or many) may run this loop on one study:
each configuration is claimed atomically before it is compiled (:mod:`tilesearch.claim`),
``trials`` counts the study's trials from every tuning process, and one that finishes its share
waits for the others' trials in flight, taking over those of a tuning process that died.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, wait
from dataclasses import dataclass, field, fields, replace
from typing import Any

import optuna

from tilesearch import provenance, registry, served, shutdown, versions
from tilesearch.builder import Builder, LocalBuilder, NullBuilder, compile_ahead
from tilesearch.builder.local import start_early
from tilesearch.claim import Claims, Verdict
from tilesearch.database import (
    RUNTIME_ATTR,
    TrialRecord,
    TuningDatabase,
    check_study_name,
    find_studies,
    study_name,
)
from tilesearch.errors import TilesearchError
from tilesearch.heartbeat import Heartbeat
from tilesearch.op import Operator, Problem
from tilesearch.phases import Phases
from tilesearch.progress import Progress
from tilesearch.records import BuildResult, Candidate, Final, Incumbent, RunResult, Status
from tilesearch.runner import MeasureSettings, Runner
from tilesearch.runner import create as create_runner
from tilesearch.runner.feed import Arrival, Feed
from tilesearch.runner.retime import CONTENDER_MARGIN, contenders, final_retime
from tilesearch.space import Space, config_key
from tilesearch.strategy import RandomStrategy, SearchContext, Strategy, create
from tilesearch.strategy.hints import Hinted
from tilesearch.target import Target

MAX_IDLE_PROPOSALS = 64  # proposals in a row that launch nothing before falling back to random
POLISH_REFITS = 3
"""Refits of the best configuration the polish times (:meth:`Tuner._start_polish`). At 784 x 4096
x 4096 on an H200 (2026-11-29, ``e4f2491``) a 40-trial xgb search settled on 128x256 tiles (112, one
wave 85% full, 0.86x ``torch.matmul``) and never timed the swapped 208x128 tile that covers M in
four tile rows (128 tiles), which ``scripts/tile_probe.py`` had measured at 0.97x; it is that
configuration's second refit."""
# The strategy is asked for this many proposals at a time (fewer with a smaller compile pool),
# after as many results: a fixed round, so that what it has seen when it proposes does not depend
# on how fast compiles finish, and large enough that a cost model scores its candidate pool once
# per round, not once per trial. The pipeline holds the compile pool's workers plus one round, so
# the pool stays busy meanwhile.
ROUND = 4
# Trials kept in flight beyond that: none. Each one more is a proposal made before a result it
# could have used; in replay, 8 more cost 0.3-1.2 points of the best a 48-trial TPE search finds on
# every GEMM dataset (RESULTS.md, fast-tuning issue). The probes set it to study the schedule
# (scripts/schedule_quality.py, scripts/timeline_probe.py).
DEEPER = 0
PATIENCE = 3.0
"""Seconds the oldest trial in flight may compile before the results launched after it are recorded
without it. Results reach the strategy in launch order, so that a rerun with the same seed proposes
the same configurations however its compiles finish (two 24-trial xgb searches of one shape on the
H100 chose kernels 4.5-9% apart when a warm compile cache reordered them). But then one slow compile
holds back every result after it, the next round's proposals wait for them, and the GPU, having timed
the rest, waits too: compiles under load took a median 1.1-2.2 s and up to 7.6 s on the H100 host
(RESULTS.md, fast-tuning issue), while the pipeline holds about 19 trials, 4 s of measuring. A warm
cache compiles in well under a second, so its reruns keep launch order; a cold run passes only the
compiles slower than about 9 in 10 there (3.2-3.9 s). How long the oldest has compiled is bounded from
below by the younger trials done: the pool starts compiles in launch order, so it started before any of
them, each of which started its compile seconds before its measurement (a queue's wait does not
count). Passed as soon as that long, not once the GPU has run dry: the proposals a pass frees take a
compile's time to reach the GPU (``scripts/schedule_sim.py`` with 7 recorded runs' compile times: the
slowest loop 15.4 s against 18.8 s in launch order, 18.1 s passing only an idle GPU's hold-up; the
runs without such a stall unchanged)."""
# A sampler's repeat of a measured configuration costs a trial (it was opened to sample it), so
# after this many in a row one proposal comes from the random fallback, which picks an untaken
# configuration before opening a trial: a nearly exhausted space gave thousands of skipped trials.
SAMPLER_REPEATS = 2


@dataclass(frozen=True)
class TuneSettings:
    """Settings of one tuning run; every field is also a ``key=value`` on the command line.

    Attributes:
        strategy: ``grid``, ``random``, ``tpe`` or any registered strategy name.
        runner: ``local`` (measure on this machine's GPU) or ``replay:PATH`` (serve a dataset).
        trials: configurations to compile and measure in the study, counting earlier runs.
        seed: seeds the strategy and the inputs.
        transfer: datasets (comma-separated paths) of other problems that ``xgb`` warm-starts from.
        hints: ``carver`` tries TileLang Carver's recommended configurations first (any strategy).
        storage: Optuna storage URL (default ``sqlite:///tilesearch.db`` or ``$TILESEARCH_STORAGE``).
        study: study name; by default made from op, problem, GPU, arch and TileLang version.
        arch: compile target; by default the measuring GPU's (``sm_90a`` on H100/H200).
        build_workers: worker processes of the compile pool (0: all cores but one; the name
            predates the word and stays for users' scripts).
        build_timeout: seconds one compilation may take.
        run_timeout: seconds one check-and-time may take.
        device: CUDA device index to measure on.
        baseline: time the op's PyTorch baseline beside each kernel.
        progress: show a progress bar.
        heartbeat: seconds between liveness checks; on a relational storage, also between
            heartbeats, so that a tuning process silent for 6 of them has its trials failed and
            re-queued (see :mod:`tilesearch.storage`); 0 turns heartbeats off.
        retime: the top configurations re-timed together at the end of the run, the baseline
            interleaved, to choose the best and its tie set (:mod:`tilesearch.runner.retime`);
            0 keeps the search's ranking.
        retime_margin: of those, the ones more than this share behind the best in the search
            are left out (:func:`~tilesearch.runner.retime.contenders`); 1 re-times them all.
        retime_processes: fresh worker processes the final re-time runs in, one after another,
            their rounds pooled; more (up to 4) while they disagree on the best. One process's
            figures of a short kernel are off by up to 1% (:mod:`tilesearch.runner.pool`).
        polish: the last trials of the budget (at most this many, and an eighth of it) measure
            the best configuration's untried rivals (the same work by another route, as the op
            knows them: :meth:`~tilesearch.op.Operator.rivals`), then its neighbours one step away
            (a stage more or less, the next tile size, the other epilogue...), the most
            promising first by the strategy's model (``xgb``'s) or else the op's estimate, once
            every search result is in: so that the
            final re-time compares the best with its nearest rivals. Two 64-trial searches of
            one shape had ended on kernels 0.5-0.8% apart that each had never tried (7 and 6
            stages; 64-wide K steps 12 deep and 128-wide 6 deep; 128x256 and 256x128 tiles),
            so their final ratios' intervals did not overlap. 0 turns it off; a strategy that
            ends the search itself, or enumerates (grid), gets none.
        race: stop timing a search trial once its 95% interval lies clearly below the best
            trial's so far (:mod:`tilesearch.runner.measure`, "Racing"); ``False`` times every
            trial to +-1%. The final re-time never races.
        verbose: print where the wall time went (:mod:`tilesearch.phases`); the figures are in
            :attr:`TuneResult.phases` either way.
        runtime: problem parameters (comma-separated, of the op's
            :attr:`~tilesearch.op.Operator.runtime_params`) compiled as run-time values, so each
            kernel serves every value and is measured at the problem's: what a range's dispatch
            artifact launches. Its study is another than the problem's own
            (:func:`~tilesearch.database.study_name`). A range tunes its sizes so: a configuration
            compiles once for all of them, and its figures are the dispatched kernel's.
    """

    strategy: str = "tpe"
    runner: str = "local"
    trials: int = 64
    seed: int = 0
    transfer: str = ""
    hints: str = ""
    storage: str | None = None
    study: str | None = None
    arch: str | None = None
    build_workers: int = 0
    build_timeout: float = 300.0
    run_timeout: float = 60.0
    device: int = 0
    baseline: bool = True
    progress: bool = True
    heartbeat: int = 10
    retime: int = 5
    retime_processes: int = 2
    retime_margin: float = CONTENDER_MARGIN
    polish: int = 6
    race: bool = True
    verbose: bool = False
    runtime: str = ""

    def __post_init__(self) -> None:
        reason = _why_bad(self)
        if reason:
            raise SettingsError(reason)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def search(self) -> Strategy:
        """The strategy these settings name (``strategy``, seeded, with ``transfer`` for ``xgb``);
        the op's hints (``hints``) are :func:`tune`'s to add."""
        return create(self.strategy, self.seed, **({"transfer": self.transfer} if self.transfer else {}))

    def runtime_params(self) -> tuple[str, ...]:
        """``runtime`` as the names it holds, sorted (so ``m,n`` and ``n,m`` are one study)."""
        return tuple(sorted({name.strip() for name in self.runtime.split(",") if name.strip()}))


class SettingsError(TilesearchError, ValueError):
    """A :class:`TuneSettings` value that cannot work (``run_timeout=0``, ``study=""``...)."""


def _why_bad(s: TuneSettings) -> str | None:
    """Why settings ``s`` cannot work, or ``None``; the command line prints this as its one line."""
    if s.trials < 1:
        return f"trials must be at least 1, got {s.trials}"
    for name in ("build_timeout", "run_timeout"):
        value = getattr(s, name)
        if not 0 < value < float("inf"):  # also false for nan
            return f"{name} must be > 0 and finite, got {value}"
    if not 0 <= s.retime_margin <= 1:  # also false for nan
        return f"retime_margin must be between 0 and 1, got {s.retime_margin}"
    if s.retime_processes < 1:
        return f"retime_processes must be at least 1, got {s.retime_processes}"
    for name in ("build_workers", "device", "heartbeat", "polish"):
        if getattr(s, name) < 0:
            return f"{name} must not be negative, got {getattr(s, name)}"
    if s.storage is not None and not s.storage.strip():
        return "storage= is empty; give a storage URL or leave storage out for the default"
    if s.study is not None:
        return check_study_name(s.study)
    return None


@dataclass
class TuneResult:
    """What a tuning run leaves: the study, its best correct trials, and counts.

    ``compile_per_min`` is configurations compiled per minute of the tuning loop's wall time
    (first proposal to last record); ``gpu_idle`` the share of that time in which the runner
    was not measuring. ``phases`` are the seconds spent per phase (:mod:`tilesearch.phases`),
    ``first_result_s`` the seconds from the start of ``tune`` to the first measured trial,
    ``before_s`` the seconds the process ran before that start (:func:`~tilesearch.phases.process_age`:
    the command line's imports and checks), ``busy_after_first`` the share of the loop's time
    after that result in which the runner measured, ``raced`` how many trials stopped being timed
    once clearly slower than the best so far (:mod:`tilesearch.runner.measure`), and ``passed`` how many results were recorded before
    an older trial's, whose compile held the GPU up (:data:`PATIENCE`).
    """

    study: str
    storage: str | None
    target: Target
    problem: Problem
    best: list[TrialRecord]
    measured_now: int
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    compile_s: float = 0.0
    replayed: bool = False
    compile_per_min: float = 0.0
    gpu_idle: float = 0.0
    final: Final | None = None
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    first_result_s: float | None = None
    before_s: float | None = None
    busy_after_first: float | None = None
    raced: int = 0
    passed: int = 0


def tune(
    op: str | Operator,
    problem: Problem | dict[str, Any] | None = None,
    *,
    settings: TuneSettings | None = None,
    strategy: str | Strategy | None = None,
    builder: Builder | None = None,
    runner: str | Runner | None = None,
    space: Space | None = None,
    **overrides: Any,
) -> TuneResult:
    """Tunes one problem of ``op`` and returns the best correct configurations.

    ``overrides`` are :class:`TuneSettings` fields (``trials=48``) or problem parameters
    (``m=4096``). ``strategy`` and ``runner`` are names (``"tpe"``, ``"replay:PATH"``) or objects;
    ``builder`` may be given as an object, else it is made from ``settings``; ``space`` replaces the op's
    own knob space (a sub-space for a sweep, say).

    A runner or builder given as an object stays open: the caller closes it, so one GPU worker
    and one compile pool can serve many problems (a range's sizes), each start paid once. Those
    made here are closed here.
    """
    if isinstance(strategy, str):
        overrides["strategy"] = strategy
        strategy = None
    if isinstance(runner, str):
        overrides["runner"] = runner
        runner = None
    operator = registry.load(op) if isinstance(op, str) else registry.check(op)
    op_ref = op if isinstance(op, str) else registry.ref(op)
    setting_keys = set(TuneSettings.keys())
    settings = replace(settings or TuneSettings(), **{k: v for k, v in overrides.items() if k in setting_keys})
    raw = {k: v for k, v in overrides.items() if k not in setting_keys}
    if problem is None:
        problem = operator.problem(**raw)
    elif not isinstance(problem, Problem):
        problem = operator.problem(**{**problem, **raw})
    runtime = settings.runtime_params()
    unknown = [name for name in runtime if name not in operator.runtime_params]
    if unknown:
        can = ", ".join(operator.runtime_params) or "no parameter"
        raise SettingsError(f"runtime={settings.runtime}: {operator.name} compiles {can} as a run-time value")
    if builder is None and runner is None and settings.runner == "local":
        start_early()  # input checked: the compile pool's TileLang import begins before the storage is read

    if runner is None and builder is None and space is None and settings.runner == "local":
        done = served.result(operator, problem, settings, served.probe())  # a finished study: no GPU worker needed
        if done is not None:
            return done

    phases = Phases()
    start = phases.start
    made = []  # the stages this call starts, and so stops; stages passed in are the caller's to close
    if runner is None:
        runner = make_runner(settings)
        made.append(runner)
    if builder is None:  # made before the runner starts: its processes warm up meanwhile
        builder = make_builder(settings, runner)
        made.append(builder)
    try:
        with phases("runner start"):
            target = runner.start()
        if settings.arch and settings.arch != target.arch:
            target = replace(target, arch=settings.arch)
        search = strategy or settings.search()
        if settings.hints:
            search = Hinted(search, settings.hints)
        space = runner.prepare(problem, space or operator.space(problem, target))
        with phases("study open"):
            db = open_study(operator, problem, target, runner, storage=settings.storage, study=settings.study,
                            sampler=search.sampler(), heartbeat=settings.heartbeat, runtime=runtime)
            notes = earlier_studies(db, problem, target)
            db.fail_stale()
        loop = _Loop(operator, op_ref, problem, space, target, db, search, builder, runner, settings, phases)
        if settings.retime and (loop.budget or db.final() is None):
            runner.expect_retime()
        loop.run()
        final = db.final()
        if settings.retime and final is None:  # none yet, or trials were measured after it
            top = contenders(db.best(settings.retime), settings.retime_margin)
            cold = [loop.candidate(dict(r.config)) for r in top if config_key(r.config) not in loop.built]
            if cold:  # earlier runs' trials, perhaps compiled on another host
                with phases("compile re-timed"):
                    compile_ahead(builder, cold)
            if top:
                with phases("final re-time"):
                    final = final_retime(runner, [(r.number, r.config) for r in top], op=problem.op,
                                         problem=problem.to_dict(), target=target, op_ref=op_ref, runtime=runtime)
                db.set_final(final)
        for name, seconds in runner.phases().items():
            phases.add(name, seconds)
    finally:
        with phases("stop workers"):
            close_stages(made)
    result = TuneResult(
        study=db.name,
        storage=settings.storage,
        target=target,
        problem=problem,
        best=db.best(10),
        measured_now=loop.measured,
        statuses=loop.statuses,
        wall_s=time.perf_counter() - start,
        compile_s=loop.compile_s,
        replayed=runner.replayed,
        compile_per_min=60 * loop.builds / loop.wall_s if loop.wall_s else 0.0,
        gpu_idle=1 - loop.run_s / loop.wall_s if loop.wall_s else 0.0,
        final=final,
        notes=notes,
        phases=dict(phases.seconds),
        first_result_s=phases.first_result_s,
        before_s=phases.before_s,
        busy_after_first=loop.busy_after_first(),
        raced=loop.raced,
        passed=loop.passed,
    )
    db.close()
    return result


def make_runner(settings: TuneSettings) -> Runner:
    """The runner ``settings`` name, measuring as they say (:func:`tune` makes one when given none)."""
    return create_runner(
        settings.runner,
        device=settings.device,
        timeout=settings.run_timeout,
        measure=MeasureSettings(baseline=settings.baseline, seed=settings.seed,
                                final_processes=settings.retime_processes,
                                **({} if settings.race else {"race_margin": 0.0})),
    )


def make_builder(settings: TuneSettings, runner: Runner) -> Builder:
    """The compile pool ``settings`` ask for; none for a runner that replays recorded figures."""
    if runner.replayed:
        return NullBuilder()
    return LocalBuilder(settings.build_workers or None, settings.build_timeout, arch=settings.arch or "sm_90a")


def close_stages(stages: list[Runner | Builder]) -> None:
    """Closes ``stages`` side by side. Each close asks its processes to exit and waits for them
    (the measuring worker tears down a CUDA context, the compile pool's workers exit): one after
    another, those waits added up to 1.8 s of a 29 s ``tune`` on the H100. Raises the first
    error a close raised, once all are closed."""
    closing = [_in_thread(stage.close) for stage in stages]
    wait(closing)
    for future in closing:
        future.result()


def open_study(operator: Operator, problem: Problem, target: Target, runner: Runner, *, storage: str | None,
               study: str | None = None, sampler: optuna.samplers.BaseSampler | None = None,
               heartbeat: int | None = None, runtime: tuple[str, ...] = ()) -> TuningDatabase:
    """The study of ``problem`` measured by ``runner`` (started) on ``target`` under the current
    conditions, of kernels with the ``runtime`` parameters (:attr:`TuneSettings.runtime`): by
    default named from op, problem, GPU, arch, TileLang version, the identity's digest
    (:mod:`tilesearch.provenance`) and those parameters; a named study of another identity raises
    :class:`~tilesearch.provenance.StaleStudyError`."""
    found_versions = {**versions.collect(), **runner.versions}
    identity = provenance.identity(operator, found_versions, runner.measured_by)
    name = study or ("replay:" if runner.replayed else "") + study_name(problem, target, identity, runtime)
    return TuningDatabase(
        storage,
        name,
        sampler=sampler,
        info={
            "op": problem.op,
            "problem": problem.key,
            "params": problem.to_dict(),
            "target": target.to_dict(),
            "versions": found_versions,
            "replayed": runner.replayed,
            provenance.IDENTITY_ATTR: identity,
            **({RUNTIME_ATTR: list(runtime)} if runtime else {}),
        },
        heartbeat=heartbeat,
    )


def earlier_studies(db: TuningDatabase, problem: Problem, target: Target) -> list[str]:
    """A note for each other study of the problem on this GPU whose identity differs: their
    trials are not reused, and the user is told why and how to compare."""
    notes = []
    for name in find_studies(db.storage, problem.op, problem, runtime=db.study.user_attrs.get(RUNTIME_ATTR, ())):
        if name == db.name:
            continue
        attrs = optuna.load_study(study_name=name, storage=db.storage).user_attrs
        if attrs.get("target", {}).get("gpu") != target.gpu or attrs.get("replayed") != db.study.user_attrs.get("replayed"):
            continue
        differ = provenance.differences(attrs.get(provenance.IDENTITY_ATTR), db.study.user_attrs[provenance.IDENTITY_ATTR])
        if not differ:
            continue
        notes.append(f"study {name} is not reused: {'; '.join(differ)}; "
                     f"tilesearch revalidate op={problem.op} {' '.join(f'{k}={v}' for k, v in problem.items())} "
                     f"study={name} compares its best under the current conditions")
    return notes


class _Loop:
    def __init__(self, operator, op_ref, problem, space, target, db, search, builder, runner, settings,
                 phases: Phases | None = None) -> None:
        self.phases = phases or Phases()
        self.first_at: float | None = None  # when the first result came
        self.run_after_first = 0.0
        self.op_ref, self.problem, self.space, self.target = op_ref, problem, space, target
        self.db, self.search, self.builder, self.runner = db, search, builder, runner
        self.context = SearchContext(operator, problem, space, target, db, settings.seed, settings.runtime_params())
        self.fallback = RandomStrategy(settings.seed)
        self.trials = settings.trials
        self.budget = max(0, settings.trials - db.evaluated())
        # trials kept for the polish (see TuneSettings)
        self.polish = min(settings.polish, self.budget // 8) if search.polished else 0
        self.polishing = False
        self.exhausted = False  # the strategy ran dry at the last fill
        # the polish's kernels compiled as the search ends (_compile_polish_ahead): their keys, the
        # best trial they were chosen for, and whether a correct result came in since (a new best?)
        self.ahead: set[str] = set()
        self.ahead_for: int | None = None
        self.news = True
        self.claims = Claims(db)
        self.heartbeat = Heartbeat(db.storage)
        self.poll_s = float(min(settings.heartbeat or 1, 1))
        self.check_s = float(settings.heartbeat or 10)
        self.checked = time.monotonic()
        self.round = min(ROUND, builder.workers + 1)
        # a strategy that learns from results gets a round more than the workers in flight; one that
        # does not, enough for the compile pool's batches (Strategy.learns)
        self.depth = builder.workers * (1 if search.learns else builder.batch) + self.round + DEEPER
        # Proposals that no result steers, launched at once: the pipeline proposes a round each
        # time a round of results is recorded, and every round proposed before the strategy has
        # seen ``search.blind`` results (trials of earlier runs count) is random start-up draws,
        # the same with results as without. Launched with the first, their compiles fill the pool
        # while the first results come in; launched later, they reached the GPU only after it had
        # timed the first ones (README's main command on an H200: the runner idle from 10.8 to
        # 12.0 s, RESULTS.md, fast-tuning issue). From then on the schedule is what it was: each
        # later proposal is made after the same records as before.
        finished = db.finished()  # one storage read: the blind start below and the incumbent
        blind = max(0, search.blind - len(finished))
        self.start_ahead = self.round * ((blind - 1) // self.round) if blind else 0
        # launched and not yet recorded, in launch order: compiling, compiled, measuring or measured
        self.pending: dict[Future[BuildResult], Any] = {}
        # for each result in (results), when its compile began at the latest: its measurement's start
        # (or, for a failed build, its arrival) less its compile seconds (PATIENCE)
        self.began: dict[Future[BuildResult], float] = {}
        self.passed = 0  # results recorded before an older trial's, still compiling after PATIENCE s
        self.results: dict[Future[BuildResult], tuple[BuildResult, RunResult | None]] = {}  # to record, in order
        self.launched = 0
        self.measured = 0
        self.compile_s = 0.0
        self.builds = 0
        self.built: set[str] = set()  # keys of the configurations compiled by this run
        self.run_s = 0.0
        self.wall_s = 0.0
        self.ended = 0.0
        self.statuses: dict[str, int] = {}
        self.idle = 0
        self.repeats = 0
        incumbent = Incumbent()
        for record in finished.values():  # earlier runs' trials count too
            incumbent = incumbent.updated(record)
        self.raced = 0
        self.feed = Feed(runner, incumbent)  # the measuring thread, which races against the best it has seen
        self.progress = Progress(self.budget, f"{problem.op} {problem.key}", settings.progress, runner.replayed)

    def run(self) -> None:
        start = time.perf_counter()
        try:
            self._run()
            self.feed.stop()
        except BaseException:
            self.feed.stop(timeout=0)  # a measurement in flight is the runner's close to end: the exit is prompt
            raise
        finally:
            self.ended = time.perf_counter()
            self.wall_s = self.ended - start

    def busy_after_first(self) -> float | None:
        """Share of the loop's time after the first result in which the runner measured."""
        if self.first_at is None or self.ended <= self.first_at:
            return None
        return self.run_after_first / (self.ended - self.first_at)

    def _run(self) -> None:
        with self.progress, self.heartbeat:
            try:
                while True:
                    shutdown.check()  # a signal whose exception a finalizer swallowed still stops the run
                    self._fill()
                    self.feed.start()  # once the first proposals are launched
                    if self._polish_may_compile():
                        self._compile_polish_ahead()
                    if self._take_arrived():
                        continue
                    if not self.pending:
                        if self._others_in_flight():
                            time.sleep(self.poll_s)
                            continue
                        if not self.polishing and self.polish and not self.exhausted and self.launched < self.budget:
                            self._start_polish()
                            continue
                        if self.exhausted and self.launched < self.budget:
                            self.progress.note("no configurations left to try")
                        return
                    # The measuring thread takes the oldest kernel compiled, not the oldest launched:
                    # the compiles of one round end seconds apart, and waiting for the oldest left
                    # the GPU idle meanwhile (1.6 s before the first trial of README's main
                    # command). Results are still recorded, and so seen by the strategy, in launch
                    # order (_take), so a rerun with the same seed proposes the same configurations,
                    # but past a compile that outlasts PATIENCE (_record_ready).
                    with self.phases("wait for measure" if self.feed.busy else "wait for build"):
                        try:
                            arrival = self.feed.arrivals.get(timeout=self._wait_s())
                        except queue.Empty:
                            self._record_ready()  # the oldest compile may have run out of patience
                            continue
                    self._take(arrival)
            except BaseException:
                # After a signal, write nothing more: the exit is prompt, and a second signal
                # (which storage calls do not hold back, see shutdown.held) may have landed inside
                # a transaction whose SQLite write lock this process still holds on another
                # connection, so a new write would wait on it (120 s) instead of exiting. The
                # trials in flight stay RUNNING with this PID; the next run's fail_stale marks
                # them interrupted, as after a SIGKILL.
                if not shutdown.received():
                    flight = list(self.pending.values())
                    self.db.interrupt(trial.number for trial in flight)
                raise

    def _fill(self) -> None:
        """Launches proposals until the pipeline is full; :attr:`exhausted` says whether the
        strategy ran dry."""
        self.exhausted = self._proposed()

    def _proposed(self) -> bool:
        if self._in_flight() > self.depth - self.round:
            return False  # the round's results are not all in yet
        budget = self.budget if self.polishing else self.budget - self.polish
        depth = self.depth + (self.start_ahead if not self.measured else 0)  # the blind rounds at the start
        while self.launched < budget and self._in_flight() < depth:
            self._check_stale()
            room = self.trials - self.db.planned()  # other tuning processes' trials count too
            if room <= 0:
                return False
            want = min(depth - self._in_flight(), budget - self.launched, room)
            stuck = self.idle >= MAX_IDLE_PROPOSALS or self.repeats >= SAMPLER_REPEATS
            source = self.fallback if stuck else self.search
            with self.phases("propose"):
                proposals = source.propose(self.context, want)
            if not proposals:
                return True
            for proposal in proposals:
                try:
                    with self.phases("database"):  # the trial's writes, and the claim
                        self._launch(proposal)
                except optuna.exceptions.UpdateFinishedTrialError:
                    self.idle += 1  # another tuning process ended the trial meanwhile (its heartbeat lapsed)
        return False

    def _polish_may_compile(self) -> bool:
        """Whether the polish's kernels may compile ahead now: every search trial launched, and
        as many compile workers idle as the polish has trials."""
        if not self.polish or self.polishing or not self.news or self.launched < self.budget - self.polish:
            return False
        compiling = sum(not future.done() for future in self.pending)
        return compiling + self.polish <= self.builder.workers

    def _in_flight(self) -> int:
        """Trials launched and not yet recorded: compiling, compiled, being measured or measured."""
        return len(self.pending)

    def _start_polish(self) -> None:
        """Every search result is in: the rest of the budget goes to the best configuration's
        untried rivals (:meth:`~tilesearch.op.Operator.rivals`), then its first
        :data:`POLISH_REFITS` untried refits (:meth:`~tilesearch.op.Operator.refits`: the same
        work in pieces that fill the GPU's waves), then its untried one-step neighbours
        (:meth:`~tilesearch.space.Space.steps`), the most promising first by the strategy's model
        (:meth:`~tilesearch.strategy.Strategy.rank`), else by the op's estimate."""
        self.polishing = True
        untried = self._polish_configs(ranked=True)
        if untried:  # else the search goes on with the rest of the budget
            self.search = _Polish(untried, self.search)

    def _compile_polish_ahead(self) -> None:
        """The best configuration's polish so far, compiled while the last search trials are
        measured and the compile pool has room: the polish itself starts only once every search
        result is in, and its compiles then left the GPU idle (2.4 s at the end of README's main
        command on the H200). Not trials: kernels in the compile cache, which the polish's own
        builds find. Ranked by the op's estimate alone, so the strategy's model is not trained on
        a part of the results. Done again for a new best among the last search results: in a
        timeline of README's main command (H200, 2026-11-29) the best changed after the polish was
        compiled ahead, and the runner then waited 1 s for the polish's own compiles."""
        self.news = False
        best = self.db.best(1)
        if not best or best[0].number == self.ahead_for:
            return
        self.ahead_for = best[0].number
        for config in self._polish_configs(ranked=False)[:self.polish]:
            candidate = self.candidate(config)
            if candidate.key not in self.ahead:
                self.ahead.add(candidate.key)
                self.builder.submit(candidate)

    def _polish_configs(self, ranked: bool) -> list[Any]:
        """The polish's configurations for the best trial recorded (see :meth:`_start_polish`),
        its neighbours ranked by the strategy's model where ``ranked``."""
        best = self.db.best(1)
        if not best:
            return []
        problem, config = self.problem.to_dict(), best[0].config
        trials = self.db.trials()  # one read for every configuration's check below
        steps = [c for c in self.space.steps(config) if self._taken(c, trials=trials) is None]
        scores = self.search.rank(self.context, steps) if steps and ranked else None  # the strategy's model
        if scores is None:
            scores = [self.context.op.estimate(problem, c, self.target) for c in steps]
        order = sorted(range(len(steps)), key=lambda i: -scores[i])  # stable: knob order on ties
        steps = [steps[i] for i in order]
        rivals = [c for c in self.context.op.rivals(problem, self.space, config) if self.space.why_invalid(c) is None]
        refits = [c for c in self.context.op.refits(problem, self.space, self.target, config, 3 * POLISH_REFITS)
                  if self._taken(c, trials=trials) is None][:POLISH_REFITS]
        untried, seen = [], set()
        for c in rivals + refits + steps:
            if config_key(c) not in seen and self._taken(c, trials=trials) is None:
                seen.add(config_key(c))
                untried.append(c)
        return untried

    def _launch(self, proposal: Any) -> None:
        trial = proposal.trial
        # A configuration checked here needs no second look once its trial is open: another process
        # that takes it meanwhile is caught by the claim (a storage read each, which grew with the
        # study: 2 of the 5 per trial of a 1,674-configuration recording).
        checked = trial is None
        if checked and self._taken(proposal.config) is not None:
            self.idle += 1  # a repeat seen before opening a trial costs the study nothing
            return
        trial = trial or self.db.ask(self.space.distributions(), self.space.to_params(proposal.config))
        config = self.space.from_params(trial.params)
        candidate = self.candidate(config)
        reason = self.space.why_invalid(config)
        if reason:
            self.db.record_invalid(trial, candidate, reason)
            self._count(Status.INVALID.value)
            self.idle += 1
            return
        self.db.claim(trial, candidate)
        claim = self.claims.claim(trial.number, candidate.key, budget=self.trials)
        # a repeat of the strategy's: checked on the trials the claim read after its ticket, not on
        # a read of its own (the storage's reads were 3.5 s of 5.3 s of database time in 48 trials)
        taken = None if checked else self._taken(config, trial.number, claim.trials)
        if taken is not None:
            self.db.record_skipped(trial, candidate, f"same configuration as trial {taken}", taken)
            self.idle += 1
            self.repeats += 1
            return
        if claim.verdict == Verdict.FULL:
            self.db.record_skipped(trial, candidate, f"budget: the study's {self.trials} trials are taken by other tuning processes")
        elif claim.verdict in (Verdict.DONE, Verdict.BUSY):
            n = claim.holder.number
            self.db.record_skipped(trial, candidate, f"same configuration as trial {n}, measured or in flight", n)
        if claim.verdict != Verdict.OWNED:
            self.idle += 1
            return
        self.idle = self.repeats = 0
        self.heartbeat.watch(trial._trial_id)
        future = self.builder.submit(candidate)
        self.pending[future] = trial
        self.feed.add(future)
        self.launched += 1

    def _take_arrived(self) -> bool:
        """Takes the results the measuring thread has put out meanwhile; whether there were any."""
        took = False
        while True:
            try:
                arrival = self.feed.arrivals.get_nowait()
            except queue.Empty:
                return took
            self._take(arrival)
            took = True

    def _take(self, arrival: Arrival | BaseException) -> None:
        """A launched build's outcome from the measuring thread (a failed build's, or its kernel's
        measurement), kept until every trial launched before it has one (:meth:`_record_ready`)."""
        if isinstance(arrival, BaseException):
            raise arrival
        build, run = arrival.build, arrival.run
        self.compile_s += build.compile_s
        self.builds += 1
        self.phases.add("pool: compile", build.compile_s)
        self.phases.add("pool: compiler processes", build.tools_s)
        if self.first_at is None:
            self.first_at = arrival.ended or time.perf_counter()
            self.phases.result_arrived()
        if run is not None:
            self.built.add(config_key(build.candidate.config))
            self.phases.add("measure", arrival.ended - arrival.began)
            self.run_s += arrival.ended - arrival.began
            self.run_after_first += max(0.0, arrival.ended - max(arrival.began, self.first_at))
            self.raced += bool(run.extra.get("raced"))
            for name, seconds in run.extra.get("phases", {}).items():
                self.phases.add(f"worker: {name}", seconds)
        self.results[arrival.future] = (build, run)
        self.began[arrival.future] = (arrival.began if run is not None else time.perf_counter()) - build.compile_s
        self._record_ready()

    def _record_ready(self) -> None:
        """Records the results in, up to the first trial still without one: the strategy sees
        results in launch order, whichever was measured first, unless that trial has compiled for
        :data:`PATIENCE` s (:meth:`_patience_left`): then it is passed."""
        while self.pending:
            oldest = next(iter(self.pending))
            if oldest not in self.results:
                if self._patience_left() > 0:
                    return
                oldest = next(f for f in self.pending if f in self.results)
                self.passed += 1
            trial = self.pending.pop(oldest)
            self.began.pop(oldest, None)
            # beating until recorded: a result held behind an older trial's slow compile (up to
            # build_timeout) must not look dead to the other tuning processes meanwhile
            self.heartbeat.drop(trial._trial_id)
            self._record(trial, *self.results.pop(oldest))
            # proposals after each record, as many as that record frees: what the strategy has
            # seen when it proposes then depends on the order of results alone, not on how many the
            # measuring thread had finished by the time the tuning process looked
            self._fill()

    def _patience_left(self) -> float:
        """Seconds until the oldest trial in flight, still compiling, has compiled for
        :data:`PATIENCE` s, by the lower bound the younger results in give (see there); ``inf`` while
        none is in, or once the oldest has compiled (the runner measures it next)."""
        if not self.results or next(iter(self.pending)).done():
            return float("inf")
        return PATIENCE - (time.perf_counter() - min(self.began[f] for f in self.results))

    def _wait_s(self) -> float:
        """How long to wait for the next arrival: at most the poll interval, and no longer than the
        oldest compile's patience lasts (it may free results already in)."""
        return min(self.poll_s, max(0.01, self._patience_left()))

    def _record(self, trial: Any, build: BuildResult, run: RunResult | None) -> None:
        with self.phases("database"):
            self.db.record(trial, build, run)
        self.measured += 1
        self.news = self.news or (run is not None and run.status == Status.OK)
        status = run.status.value if run is not None else (
            Status.COMPILE_TIMEOUT.value if build.timed_out else Status.COMPILE_ERROR.value
        )
        self._count(status)
        self.progress.update(status, run)

    def _taken(self, config: Any, number: int | None = None, trials: list[Any] | None = None) -> int | None:
        """The trial that measured ``config`` or measures it now (not trial ``number``), if any;
        among ``trials`` where given (a read of the study made for several checks)."""
        return self.db.taken(self.candidate(config).key, number, trials)

    def candidate(self, config: Any) -> Candidate:
        """``config`` of this study's problem, ready to build and run (the key its strategy knows
        it by, :meth:`SearchContext.candidate`, with where workers load the op from)."""
        return replace(self.context.candidate(config), op_ref=self.op_ref)

    def _check_stale(self) -> None:
        """Every ``heartbeat`` seconds, frees the trials of tuning processes that died."""
        if time.monotonic() - self.checked >= self.check_s:
            self.db.fail_stale()
            self.checked = time.monotonic()

    def _others_in_flight(self) -> bool:
        """Whether other tuning processes still measure trials of this study (a dead one's are freed)."""
        self._check_stale()
        return self.db.live_in_flight(exclude={trial.number for trial in self.pending.values()}) > 0

    def _count(self, status: str) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1


def _in_thread(fn: Any, *args: Any) -> Future[Any]:
    """``fn(*args)`` in a daemon thread of its own: a measurement still running when ``tune`` is
    interrupted must not hold the interpreter's exit (an executor's threads are joined at exit)."""
    future: Future[Any] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the tuning thread, which raises it
            future.set_exception(exc)

    threading.Thread(target=target, name="tilesearch-measure", daemon=True).start()
    return future


class _Polish(Strategy):
    """Proposes the polish's configurations in their order, then what ``then`` proposes."""

    name = "polish"

    def __init__(self, configs: list[Any], then: Strategy) -> None:
        self.configs, self.then = list(configs), then

    def propose(self, context: SearchContext, n: int) -> list[Any]:
        from tilesearch.strategy.base import Proposal

        out, self.configs = [Proposal(c) for c in self.configs[:n]], self.configs[n:]
        return out + (self.then.propose(context, n - len(out)) if len(out) < n else [])
