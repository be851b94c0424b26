"""What runs inside a runner's worker process on the GPU: check a kernel against the reference, then time it.

Method: fresh random inputs per candidate; outputs poisoned with NaN before the run, so an
unwritten element fails; errors against a float64 reference; then warm-up and many rounds timed
with CUDA events, L2 flushed before every run, the op's baseline timed interleaved with the
kernel on the same inputs (one run of each per round) so that clock drift cancels in their ratio,
and the rounds cycle through several copies of the inputs at other addresses (:class:`Placements`).
Rounds are added until the ratio's 95% interval is within ``precision`` or the time cap is hit
(:mod:`tilesearch.runner.stats`); NVML's clock, temperature and power are read around the timing
(:mod:`tilesearch.runner.nvml`): a timing taken while the clock sat well below its usual level is
flagged, and done once more where no baseline ran beside it (:func:`timed`).

**Racing.** Most trials of a search are clearly slower than the best one found so far, and timing
such a trial to +-1% spends GPU time on a figure whose only use is to say that it lost. So
:func:`measure` takes the search's incumbent (:class:`~tilesearch.records.Incumbent`), looks at
the trial after a short first look (``race_ms``, at least :data:`RACE_ROUNDS` rounds), again each
time its rounds have doubled, and after every batch after the first, and stops once the upper
bound of the trial's 95% ratio interval lies below ``1 - race_margin`` times the incumbent's lower
bound (:func:`racer`). The trial keeps its median and its wider interval and is marked ``raced``
in its record. A trial near or above the incumbent goes on to the same rounds as without racing
(the ``rep_ms`` batch, then doubling) and meets ``precision`` as before, as the trust issue asks.
Racing changes how precisely a loser is timed, never which trials are kept: the final re-time
takes the fastest medians of the search, raced or not, and never races (:func:`measure_together`).

Why these sizes: on the H100 (8192^3 float16, commit ``fcf9874``) the search's ratio intervals
after the 200 ms first batch (66-69 rounds) had half-widths of 0.03-0.65%. A half-width shrinks
as one over the square root of the rounds, so a look at a third of them is within about +-1.2%,
well inside the 3% margin: a trial some 5% or more behind the incumbent is decided at the look.
Most trials are far behind: in the first full-space recording (1024^3 float16, H200, 20 us
kernels) the median trial ran at half the incumbent's speed. With one look at 50 ms of GPU time
(then several hundred rounds of a short kernel) and the next at the end of the first batch,
such trials still took a median 1,391 rounds and 0.58 s each. The first look is now 5 ms of GPU
time and the looks double from there, so a trial is timed about as long as its distance from the
incumbent needs; the extra looks cost a bootstrap each, milliseconds on the host.
:data:`RACE_ROUNDS` keeps a look meaningful where a round is long: each of the :data:`PLACEMENTS`
copies runs at least twice, and the 95% bounds of a median of 10 rounds are interior order
statistics (the 2nd and 9th), not the sample's extremes. It was 20 rounds: at 8192^3 a round
(the kernel and the baseline, each behind an L2 flush) takes about 4.5 ms, and the 42 raced
trials of README's main command took 148 ms each, 6.2 s of its 29 s (RESULTS.md, fast-tuning
issue); their ratios were 0.70-0.79 against an incumbent's 0.93, decided at either look. The margin, three times the precision,
also covers the up to 1% that a short kernel's ratio shifts from one worker process to the next
(:mod:`tilesearch.runner.pool`), since the incumbent may have been timed in another one. ``rep_ms``
itself stays 200 ms: it is the least a trial is timed before it may stop as precise, the setting
under which the trust runs' intervals were checked, and shortening it for the trials that matter
needs a GPU run that shows their intervals still cover.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tilesearch.records import Candidate, Incumbent, RunResult, Status
from tilesearch.runner import nvml, stats

_FLUSH: dict[int, Any] = {}
FINAL_MAX_MS = 6000.0  # GPU time cap of the final re-time's rounds (all candidates and the baseline)
# The final re-time first runs its rounds untimed for this long, so that the GPU reaches the clock
# it holds under sustained load before any round counts. Without it the final figures depended on
# what the GPU did just before: on an H100, two runs' finals of one 8192^3 float16 shape were timed
# at 1980 MHz (after idle compile time) and at 1410 MHz (right after back-to-back trials), and
# their ratios to torch.matmul, 0.997 and 1.001, missed each other's intervals by 0.2%.
FINAL_SETTLE_MS = 1500.0
# A re-time's later process settles for less when its spare was ready: it then starts within a second
# of the previous process's last round (loading and checking take 0.4-0.6 s at 8192^3), so the
# GPU comes from sustained load, not from idle, and the clock it holds under load is reached again
# within a few hundred milliseconds. At 1.5 s each, the two processes' settling was 3 s of the 6 s
# re-time of README's main command. Should the shorter settle leave processes apart, the pool's
# rule (:func:`tilesearch.runner.pool.disagree`) adds a process, as it would for any other cause.
# The first process settles in full even right after the search's last trial: tried on the H200
# (2026-12-03), its rounds then ran before the GPU reached that state (NVML's power 330-500 W
# against 686-691 W, kernel and torch.matmul both about 2% faster), since racing trials leave it
# idle a quarter of the time; the search does not stand in for sustained load.
FINAL_RESETTLE_MS = 300.0
RESETTLE_WITHIN_S = 1.0  # the most the GPU may wait between two processes for the shorter settle
PLACEMENTS = 4  # copies of the inputs the timed rounds cycle through (fewer where memory is short)
PLACEMENT_MEMORY_SHARE = 0.2  # of the free GPU memory, at most, for the extra copies
RACE_ROUNDS = 10  # rounds of a racing trial's first look, at least (see the module docstring)


@dataclass(frozen=True)
class MeasureSettings:
    """How a runner checks and times a candidate.

    Attributes:
        warmup_ms: GPU time spent warming up before timing.
        rep_ms: GPU time of the first batch of timed rounds (bounded by ``min_reps`` and
            ``max_reps``).
        precision: rounds are added until each kernel's ratio to the baseline (or, without
            one, its median) has a 95% interval within this relative half-width; 0 stops after
            the first batch.
        max_ms: GPU time cap of all timed rounds together, whatever the precision reached.
        baseline: time the op's baseline beside each candidate.
        flush_l2: overwrite a buffer twice the L2's size before each timed run.
        seed: mixed with the candidate's key to seed its inputs; also seeds the bootstrap.
        final_processes: fresh worker processes the final re-time pools, one after another
            (more, up to :data:`tilesearch.runner.pool.MAX_PROCESSES`, while they disagree on
            the best of several): one process's figures of a short kernel are off by up to 1%.
        drift: the 95% half-width (relative) of what a run's ratio to the baseline moves by
            between runs minutes apart (another power state, :func:`stats.with_drift`), added
            in quadrature to the final re-time's ratio intervals, so that a second ``tune``'s
            interval meets the first's; the default is the H100's, from 33 re-timed pairs; 0
            reports the rounds' spread alone. Search trials and ``precision`` leave it out.
        race_margin: a search trial stops being timed once its ratio's 95% interval lies
            entirely below the incumbent's by this share (:func:`racer`); 0 times every trial
            to ``precision``.
        race_ms: GPU time of a racing trial's first look (at least :data:`RACE_ROUNDS` rounds,
            at most the ``rep_ms`` batch); the next looks double its rounds up to that batch.
        settle_ms: GPU time of the untimed rounds that open a final re-time's timing
            (:data:`FINAL_SETTLE_MS`; the runner gives a re-time's later processes
            :data:`FINAL_RESETTLE_MS`).
    """

    warmup_ms: float = 25.0
    rep_ms: float = 200.0
    min_reps: int = 10
    max_reps: int = 3000
    precision: float = 0.01
    max_ms: float = 2000.0
    baseline: bool = True
    flush_l2: bool = True
    seed: int = 0
    final_processes: int = 2
    drift: float = 0.003
    race_margin: float = 0.03
    race_ms: float = 5.0
    settle_ms: float = FINAL_SETTLE_MS


def device_info() -> dict[str, Any]:
    """:func:`device_facts` after :func:`warm_up`: the start of a fresh worker process that is
    to time next (a spare, a replacement)."""
    warm_up()
    return device_facts()


def device_facts() -> dict[str, Any]:
    """The worker process's GPU as a :class:`~tilesearch.target.Target` dict, plus software
    versions: torch and a CUDA context, no TileLang yet (:func:`warm_up`)."""
    from tilesearch import target, versions

    info = target.detect().to_dict()
    info["versions"] = {**versions.collect(torch_cuda=True), "driver": nvml.driver_version()}
    return info


def warm_up() -> None:
    """Imports TileLang (1.3-1.5 s on the H100 host), so that the first measure does not pay for it;
    without ml_dtypes (:mod:`tilesearch.tilelang_import`)."""
    from tilesearch.tilelang_import import import_tilelang

    import_tilelang()


def _poison(tensor: Any) -> None:
    import torch

    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).max)


def check(kernel: Any, inputs: Any, outputs: Any, references: Any, tol: Any) -> tuple[float, float, str | None]:
    """Runs ``kernel(*inputs, *outputs)`` once on outputs poisoned first (so an unwritten element
    fails), then :func:`compare` s them with ``references``."""
    for out in outputs:
        _poison(out)
    kernel(*inputs, *outputs)
    if any(out.is_cuda for out in outputs):
        import torch

        torch.cuda.synchronize()
    return compare(outputs, references, tol)


def compare(outputs: Any, references: Any, tol: Any) -> tuple[float, float, str | None]:
    """Worst relative Frobenius and max errors over the outputs, and why they fail, if they do."""
    import torch

    worst_fro, worst_max, why = 0.0, 0.0, None
    for i, (out, ref) in enumerate(zip(outputs, references)):
        got = out.to(torch.float64)
        ref = ref.to(device=got.device, dtype=torch.float64)
        if got.shape != ref.shape:
            return float("inf"), float("inf"), f"output {i} has shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
        bad = (~torch.isfinite(got)).sum().item()
        if bad:
            return float("inf"), float("inf"), f"output {i}: {bad} elements are NaN/inf (unwritten or overflowed)"
        diff = got - ref
        tiny = torch.finfo(torch.float64).tiny
        fro = (diff.norm() / max(ref.norm().item(), tiny)).item()
        mx = (diff.abs().max() / max(ref.abs().max().item(), tiny)).item()
        worst_fro, worst_max = max(worst_fro, fro), max(worst_max, mx)
        if why is None and (fro > tol.rel_fro or mx > tol.max_rel):
            why = (
                f"output {i}: relative error {fro:.3g} (tolerance {tol.rel_fro:.3g}), "
                f"max error {mx:.3g} (tolerance {tol.max_rel:.3g})"
            )
    return worst_fro, worst_max, why


class Placements:
    """Copies of one problem's inputs at different addresses, each behind a spacer allocation of
    random size; :meth:`cycle` makes a function that runs on the next copy at each call.

    Where the operands lie in memory moves a short kernel's time: on an H100 the ratio of a 26 us
    16x4096x4096 GEMM to ``torch.matmul`` spread from 0.880 to 0.898 over three copies of the same
    inputs in one process, as far as it spread across fresh processes (``scripts/placement_probe.py``),
    while a 365 us GEMM's moved by 0.3%. Every function of a round calls once per round, so all
    run on the same copy in a round (the ratio stays paired), the median averages over copies, and
    the interval, bootstrapped over rounds, covers their spread: a fresh process no longer draws
    one placement for the whole measurement. Peers (:mod:`tilesearch.runner.peer`) run on the
    first copy only: an autotuning peer made again for each copy would tune again each time.

    ``seed=None`` draws the spacers from fresh entropy: the final re-time's processes
    (:mod:`tilesearch.runner.pool`) must each sample placements of their own, or two runs' finals
    would repeat one run's layouts."""

    def __init__(self, inputs: Sequence[Any], seed: int | None, count: int = PLACEMENTS) -> None:
        import torch

        size = sum(t.numel() * t.element_size() for t in inputs if torch.is_tensor(t))
        free, _ = torch.cuda.mem_get_info()
        count = max(1, min(count, 1 + int(PLACEMENT_MEMORY_SHARE * free) // max(size, 1)))
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        self.inputs: list[tuple[Any, ...]] = [tuple(inputs)]
        self._spacers = []
        for _ in range(count - 1):
            self._spacers.append(torch.empty(rng.randrange(1, 64) * 2**20 + rng.randrange(0, 2**20, 256),
                                             dtype=torch.int8, device="cuda"))
            self.inputs.append(tuple(t.clone() if torch.is_tensor(t) else t for t in inputs))

    def cycle(self, make: Callable[[tuple[Any, ...]], Callable[[], Any]]) -> Callable[[], Any]:
        """``make(inputs)`` for every copy, called in turn: one call runs the next copy's function."""
        fns = [make(inputs) for inputs in self.inputs]
        if len(fns) == 1:
            return fns[0]
        turn = itertools.cycle(fns)
        return lambda: next(turn)()


def checked_peers(peers: Sequence[Any], op: Any, problem: Any, inputs: Any, target: Any, references: Any,
                  tol: Any) -> list[tuple[RunResult, Any]]:
    """Each peer made (:class:`~tilesearch.runner.peer.Peer`) and run once, its outputs compared
    with ``references``: ``(result so far, callable to time or None)`` per peer. A peer that
    cannot be made (its library missing) or computes wrong results is a result, not a raise."""
    out: list[tuple[RunResult, Any]] = []
    for peer in peers:
        where = {"peer": peer.name}
        start = time.perf_counter()
        try:
            fn = peer.make(op, problem, inputs, target)
            where["make_s"] = time.perf_counter() - start  # an autotuning peer tunes here
            got = fn()
            got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
            if any(getattr(t, "is_cuda", False) for t in got):
                import torch

                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a peer's failure is data, like a kernel's
            out.append((RunResult(Status.RUNTIME_ERROR, error=f"peer {peer.name}: {type(e).__name__}: {e}",
                                  extra=where), None))
            continue
        if not peer.checked:
            out.append((RunResult(Status.OK, extra={**where, "checked": False}), fn))
            continue
        rel, mx, why = compare(got, references, tol)
        if why and not peer.gated:
            out.append((RunResult(Status.OK, rel_err=rel, max_err=mx, extra={**where, "outside_tolerance": why}), fn))
            continue
        status = Status.WRONG_RESULT if why else Status.OK
        out.append((RunResult(status, error=why, rel_err=rel, max_err=mx, extra=where), None if why else fn))
    return out


def bench(fns: list[Any], settings: MeasureSettings, l2_bytes: int) -> list[float]:
    """Median milliseconds of each of ``fns``, timed interleaved with CUDA events."""
    return [statistics.median(samples) for samples in rounds(fns, settings, l2_bytes)]


def rounds(fns: list[Any], settings: MeasureSettings, l2_bytes: int,
           enough: Callable[[list[list[float]]], bool] | None = None,
           busy: Callable[[], None] | None = None,
           race: Callable[[list[list[float]]], bool] | None = None) -> list[list[float]]:
    """Milliseconds of each of ``fns`` per round (one run of each, in order, per round).

    After a first batch of about ``rep_ms``, batches of rounds are added until ``enough(samples)``
    holds (default: :func:`precise_enough` with the last of ``fns`` as the baseline if there are
    several), ``max_ms`` of GPU time or ``max_reps`` rounds are spent. With ``race`` (from
    :func:`racer`) the first batch is taken in looks, the first of about ``race_ms``, each next one
    doubling the rounds, and timing stops after any look or batch where ``race(samples)`` holds.
    ``busy()`` is called after each batch is queued, while the GPU runs it (to read its clock
    under load)."""
    import torch

    flush = None
    if settings.flush_l2:
        size = max(2 * l2_bytes, 64 * 2**20)
        flush = _FLUSH.get(size)
        if flush is None:
            flush = _FLUSH[size] = torch.empty(size, dtype=torch.int8, device="cuda")

    def timed_round(events: list[Any]) -> None:
        for fn, (start, end) in zip(fns, events):
            if flush is not None:
                flush.zero_()
            start.record()
            fn()
            end.record()

    def new_events() -> list[Any]:
        return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns]

    probe = new_events()
    timed_round(probe)  # first call: module load, allocations
    torch.cuda.synchronize()
    probe = [new_events() for _ in range(3)]
    queued = time.perf_counter()
    for events in probe:
        timed_round(events)
    host_round = (time.perf_counter() - queued) * 1e3 / 3  # ms the host takes to queue one round
    torch.cuda.synchronize()
    per_round = sum(s.elapsed_time(e) for events in probe for s, e in events) / 3
    per_round = max(per_round, 1e-3)
    for _ in range(int(settings.warmup_ms / per_round)):
        timed_round(new_events())
    enough = enough or (lambda samples: precise_enough(samples, settings, baseline=len(fns) > 1))
    hold = _Hold(host_round, per_round)

    def take(batch: int) -> list[list[float]]:
        events_list = [new_events() for _ in range(batch)]
        for chunk in range(0, batch, hold.chunk):
            hold.spin()
            for events in events_list[chunk:chunk + hold.chunk]:
                timed_round(events)
        if busy is not None:
            busy()
        torch.cuda.synchronize()
        return [[events[i][0].elapsed_time(events[i][1]) for events in events_list] for i in range(len(fns))]

    first = int(min(max(settings.rep_ms / per_round, settings.min_reps), settings.max_reps))
    cap = int(min(max(settings.max_ms / per_round, first), settings.max_reps))
    look = int(min(max(settings.race_ms / per_round, RACE_ROUNDS), first))
    return adaptive(take, first=first, cap=cap, enough=enough, look=look, race=race)


class _Hold:
    """Keeps the host ahead of the GPU while rounds are queued.

    A round's events time whatever the GPU does between them. When the host queues rounds more
    slowly than the GPU runs them (a kernel of a few microseconds behind a Python call, or a host
    busy with compile processes), the GPU reaches a start event before the function's launch has
    arrived, and the launch latency is timed as if it were the kernel's: on the H100 a 16x4096x4096
    ``torch.matmul`` measured 24 us in one process and 40 us in the next. So before each chunk of
    rounds the stream is held by a spin kernel (``torch.cuda._sleep``) long enough for the host to
    queue the whole chunk; the GPU then runs the chunk back to back, as it would inside a model.

    The hold is sized once, from the probe's rounds. Sizing it again from the time the host took to
    queue each chunk (to follow a host slowed by compile processes) ran away on the H100: one
    trial's timing took 36 s. Most likely a chunk of more launches than CUDA's launch queue holds
    blocked the host until the GPU had worked through the spin, that wait counted as the host's
    pace, and the next spin grew. The compile pool's lower priority (tilesearch.builder.local)
    keeps the host's pace instead.
    """

    CHUNK_MS = 20.0  # host time to queue one chunk

    def __init__(self, host_round_ms: float, gpu_round_ms: float) -> None:
        import torch

        self.chunk = max(1, int(self.CHUNK_MS / max(host_round_ms, 1e-4)))
        # the host must stay ahead through the chunk: hold for the time it queues faster than the GPU runs
        lead_ms = max(2 * host_round_ms, self.chunk * (1.5 * host_round_ms - gpu_round_ms))
        self.cycles = int(lead_ms * _cycles_per_ms(torch))

    def spin(self) -> None:
        import torch

        if self.cycles > 0:
            torch.cuda._sleep(self.cycles)


_CYCLES_PER_MS: list[float] = []


def _cycles_per_ms(torch: Any) -> float:
    """Spin-kernel cycles per millisecond on this GPU, measured once per worker process."""
    if not _CYCLES_PER_MS:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # first launch loads the kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        _CYCLES_PER_MS.append(cycles / max(start.elapsed_time(end), 1e-3))
    return _CYCLES_PER_MS[0]


def adaptive(take: Callable[[int], list[list[float]]], *, first: int, cap: int,
             enough: Callable[[list[list[float]]], bool], look: int = 0,
             race: Callable[[list[list[float]]], bool] | None = None) -> list[list[float]]:
    """Samples from ``take(rounds)`` (per function, per round): ``first`` rounds, then doubling
    the rounds taken until ``enough(samples)`` or ``cap`` rounds.

    With ``race``, the first ``first`` rounds are taken in looks (if ``look`` is fewer): ``look``
    rounds, then as many again as are in, up to ``first``; and ``race(samples)`` after any look or
    batch stops early. ``enough`` is asked only once ``first`` rounds
    are in, and before ``race``, so a trial that does not race is taken in the same batches, and
    stops at the same point, as without ``race``; and ``race``'s last verdict (:attr:`Race.stopped`)
    says whether it is what stopped the timing."""
    samples: list[list[float]] = []
    batch = look if race is not None and 0 < look < first else first
    while batch > 0:
        got = take(batch)
        samples = [old + new for old, new in zip(samples, got)] if samples else got
        done = len(samples[0])
        if done >= cap or (done >= first and enough(samples)) or (race is not None and race(samples)):
            break
        batch = min(min(done, first - done) if done < first else done, cap - done)
    return samples


class Race:
    """The race rule of one search trial (see the module docstring), called with the samples so
    far (the kernel first, the baseline last): it holds once the kernel is clearly slower than
    the incumbent's figure ``best``. With a baseline, the upper bound of the kernel's ratio's 95%
    interval lies below ``1 - margin`` times ``best`` (the incumbent's ratio); without one, the
    lower bound of its median's interval lies above ``best`` (the incumbent's latency) divided by
    ``1 - margin``. ``stopped`` is what its last call said: after :func:`adaptive`, whether the
    race is what stopped the timing."""

    def __init__(self, best: float, *, baseline: bool, margin: float, seed: int) -> None:
        self.best, self.baseline, self.keep, self.seed = best, baseline, 1 - margin, seed
        self.stopped = False

    def __call__(self, samples: list[list[float]]) -> bool:
        if self.baseline:
            self.stopped = stats.ratio(samples[-1], samples[0], seed=self.seed, resamples=500).high < self.keep * self.best
        else:
            self.stopped = self.keep * stats.spread(samples[0], seed=self.seed, resamples=500).low > self.best
        return self.stopped

    def record(self) -> dict[str, Any]:
        """What a trial's record says of the race: ``raced`` and the incumbent's figure it lost
        to, ``raced_against``, if the race stopped it; nothing otherwise."""
        return {"raced": True, "raced_against": self.best} if self.stopped else {}


def racer(incumbent: Incumbent | None, settings: MeasureSettings, *, baseline: bool) -> Race | None:
    """The :class:`Race` of a trial against ``incumbent``, timed with or without a ``baseline``;
    ``None`` (time it to ``precision``) without an incumbent figure of that kind, or with
    ``race_margin`` 0."""
    if incumbent is None or settings.race_margin <= 0:
        return None
    best = incumbent.speedup if baseline else incumbent.latency_ms
    if best is None or best <= 0:
        return None
    return Race(best, baseline=baseline, margin=settings.race_margin, seed=settings.seed)


def precise_enough(samples: list[list[float]], settings: MeasureSettings, *, baseline: bool) -> bool:
    """Whether each kernel's ratio to the baseline (the last of ``samples``), or without one each
    median, has a 95% interval within ``settings.precision``."""
    if settings.precision <= 0:
        return True
    if baseline:
        intervals: Sequence[stats.Ratio | stats.Spread] = [
            stats.ratio(samples[-1], s, seed=settings.seed, resamples=500) for s in samples[:-1]]
    else:
        intervals = [stats.spread(s, seed=settings.seed, resamples=500) for s in samples]
    return stats.precise(intervals, settings.precision)


def figures(kernel: Sequence[float], baseline: Sequence[float] | None, seed: int) -> dict[str, Any]:
    """The :class:`RunResult` figures of one kernel's samples and, if timed, its baseline's
    samples of the same rounds."""
    spread = stats.spread(kernel, seed=seed)
    out: dict[str, Any] = {"latency_ms": spread.median, "latency_q1": spread.q1, "latency_q3": spread.q3,
                           "latency_low": spread.low, "latency_high": spread.high, "runs": spread.runs}
    if baseline is not None:
        ratio = stats.ratio(baseline, kernel, seed=seed)
        out.update(baseline_ms=statistics.median(baseline), speedup=ratio.value, speedup_low=ratio.low,
                   speedup_high=ratio.high)
    return out


def timed(fns: list[Any], settings: MeasureSettings, l2_bytes: int, race: Race | None = None, *,
          paired: bool = False) -> tuple[list[list[float]], dict[str, Any], float]:
    """:func:`rounds` (racing with ``race``) with NVML readings around them. Returns the samples,
    the clock record and the seconds the first try and the pause after it took where a throttled
    clock made it time again (0 otherwise).

    ``paired``: the last of ``fns`` is the baseline, run in the same rounds. Then a throttled clock
    is flagged (``throttled``), never timed again: it slowed the baseline alike, and the figures
    that rank the trials, and the final re-time's, are ratios to it. Without a baseline the clock
    is in the figure, so a throttled timing is taken once more after a pause, ``throttled`` only if
    the second try was too. On the H100 at its 700 W limit (8192^3 float16, the README command) the
    second tries of paired timings took 16-18 s of a 57-61 s run (12 of 47 trials) and, limited to
    the trials near the best, still 4-8 s (RESULTS.md, fast-tuning issue)."""
    def attempt() -> tuple[list[list[float]], dict[str, Any], bool]:
        readings: list[nvml.Reading | None] = []
        if race is not None:
            race.stopped = False  # a second try is raced afresh
        samples = rounds(fns, settings, l2_bytes, busy=lambda: readings.append(nvml.read()), race=race)
        record = nvml.figures(readings)  # read while each batch ran: the clock under load
        return samples, record, nvml.throttled(record.get("sm_clock_mhz"))

    began = time.perf_counter()
    samples, record, low = attempt()
    again = 0.0
    if low and not paired:
        time.sleep(1.0)
        again = time.perf_counter() - began
        samples, record, low = attempt()
    return samples, ({**record, "throttled": low} if record else {}), again


def measure(candidate: Candidate, settings: MeasureSettings, incumbent: Incumbent | None = None) -> RunResult:
    """Builds (from TileLang's cache), checks and times one candidate on GPU 0, racing it against
    ``incumbent`` (the search's best so far; see the module docstring)."""
    import torch

    from tilesearch.op import Problem
    from tilesearch.space import digest

    start = time.perf_counter()
    op = candidate.load_op()
    problem = Problem(op.name, candidate.problem)
    kernel = candidate.build(op)  # with its run-time parameters: the kernel the builder compiled
    phases = {"load": time.perf_counter() - start}  # from TileLang's cache (or compiled here)

    device = torch.device("cuda")
    generator = torch.Generator(device=device)
    generator.manual_seed(int(digest(candidate.key, settings.seed), 16) % 2**62)
    inputs = op.make_inputs(problem, device, generator)
    outputs = op.make_outputs(problem, device)
    checked = time.perf_counter()
    rel, mx, why = check(kernel, inputs, outputs, op.reference(problem, inputs), op.tolerance(problem, candidate.config))
    phases["check"] = time.perf_counter() - checked
    if why is not None:
        return RunResult(Status.WRONG_RESULT, error=why, rel_err=rel, max_err=mx, measure_s=time.perf_counter() - start,
                         extra={"phases": phases})
    timing = time.perf_counter()

    placed = Placements(inputs, settings.seed)
    fns = [placed.cycle(lambda own: _runs(kernel, own, outputs if own is placed.inputs[0] else op.make_outputs(problem, device)))]
    base = op.baseline(problem, inputs) if settings.baseline else None
    if base is not None:
        fns.append(placed.cycle(lambda own: base if own is placed.inputs[0] else op.baseline(problem, own)))
    race = racer(incumbent, settings, baseline=base is not None)
    samples, clock, again = timed(fns, settings, candidate.target.l2_bytes, race, paired=base is not None)
    found = figures(samples[0], samples[1] if base is not None else None, settings.seed)
    phases["time (raced)" if race is not None and race.stopped else "time"] = time.perf_counter() - timing - again
    if again:
        phases["time: throttled, timed again"] = again
    return RunResult(
        Status.OK,
        tflops=op.flops(problem) / (found["latency_ms"] * 1e-3) / 1e12,
        rel_err=rel,
        max_err=mx,
        measure_s=time.perf_counter() - start,
        **found,
        **clock,
        extra={"phases": phases, **(race.record() if race is not None else {})},
    )


def _runs(kernel: Any, inputs: tuple[Any, ...], outputs: Any) -> Callable[[], Any]:
    """A call of ``kernel`` on ``inputs`` into ``outputs``."""
    return lambda: kernel(*inputs, *outputs)


@dataclass
class _Ready:
    """A re-time's candidates loaded and checked in this worker process, its rounds' functions
    made: what :func:`prepare_together` leaves for :func:`measure_together`."""

    key: tuple[Any, ...]
    op: Any
    problem: Any
    results: list[RunResult]
    fns: list[Callable[[], Any]]
    paired: bool
    l2_bytes: int
    held: tuple[Any, ...]  # the spacer ahead of the inputs and their copies, held until timed
    load_s: float


_READY: list[_Ready] = []  # at most one, for the next measure_together of the same candidates


def together_key(candidates: Sequence[Candidate], settings: MeasureSettings, peers: Sequence[Any] = ()) -> tuple[Any, ...]:
    """What a prepared re-time must match to be timed as prepared: the candidates, the seed of
    their inputs, the baseline and the peers."""
    return (tuple(c.key for c in candidates), settings.seed, settings.baseline, tuple(getattr(p, "name", p) for p in peers))


def prepare_together(candidates: list[Candidate], settings: MeasureSettings, peers: Sequence[Any] = ()) -> dict[str, float]:
    """:func:`measure_together`'s loading and checking, done ahead in this worker process, so that
    its call with the same candidates, seed and peers only times. The runner prepares the final
    re-time's processes side by side before any of them times (:meth:`LocalRunner.retime
    <tilesearch.runner.local.LocalRunner.retime>`): a process's load and check ran while the GPU
    did nothing else, 0.6-0.7 s each on the H100 host at 8192^3. Returns its phases."""
    _READY.clear()
    if candidates:
        _READY.append(_ready(candidates, settings, peers))
        return {"load and check": _READY[0].load_s}
    return {}


def measure_together(candidates: list[Candidate], settings: MeasureSettings, peers: Sequence[Any] = ()) -> list[RunResult]:
    """Checks each candidate of one problem and each peer (:mod:`tilesearch.runner.peer`), then
    times all that pass and the baseline interleaved in the same rounds (the re-time of
    :mod:`tilesearch.runner.retime`), so that their ratios share every round's clock. Rounds are
    added until every ratio is within ``settings.precision``. One result per candidate, then
    one per peer. What :func:`prepare_together` loaded and checked for the same candidates is
    timed without loading them again."""
    if not candidates:
        _READY.clear()
        return []
    # the final figures: allow more rounds than a trial of the search gets, after a settling warm-up
    settings = replace(settings, max_ms=max(settings.max_ms, FINAL_MAX_MS),
                       warmup_ms=max(settings.warmup_ms, settings.settle_ms))
    key = together_key(candidates, settings, peers)
    ready = _READY.pop() if _READY and _READY[-1].key == key else None
    _READY.clear()
    loaded = ready is None  # now, not ahead
    if ready is None:
        ready = _ready(candidates, settings, peers)
    timing = time.perf_counter()
    samples, clock, _ = timed(ready.fns, settings, ready.l2_bytes, paired=ready.paired) if ready.fns else ([], {}, 0.0)
    phases = {**({"load and check": ready.load_s} if loaded else {}), "settle and time": time.perf_counter() - timing}
    del ready.held  # held until the rounds are timed
    baseline = samples[-1] if ready.paired else None
    out, column = [], 0
    for result in ready.results:
        if result.status != Status.OK:
            out.append(result)
            continue
        kernel_rounds = samples[column]
        column += 1
        found = figures(kernel_rounds, baseline, settings.seed)
        out.append(RunResult(Status.OK, tflops=ready.op.flops(ready.problem) / (found["latency_ms"] * 1e-3) / 1e12,
                             rel_err=result.rel_err, max_err=result.max_err,
                             measure_s=ready.load_s + time.perf_counter() - timing, **found, **clock,
                             extra={**result.extra, "retimed_together": len(ready.fns), "samples": kernel_rounds, "phases": phases,
                                    **({"baseline_samples": baseline} if baseline is not None else {})}))
    return out


def _ready(candidates: list[Candidate], settings: MeasureSettings, peers: Sequence[Any]) -> _Ready:
    """Loads and checks ``candidates`` and ``peers`` on fresh inputs of ``settings.seed`` and makes
    the functions their rounds call, the baseline's last."""
    import torch

    from tilesearch.op import Problem
    from tilesearch.space import digest

    start = time.perf_counter()
    first = candidates[0]
    op = first.load_op()
    problem = Problem(op.name, first.problem)
    device = torch.device("cuda")
    generator = torch.Generator(device=device)
    generator.manual_seed(int(digest(first.op, first.problem, settings.seed), 16) % 2**62)
    # the first copy too behind a spacer of fresh random size (see Placements, seed=None)
    lead = torch.empty(random.SystemRandom().randrange(1, 256) * 2**20, dtype=torch.int8, device=device)
    inputs = op.make_inputs(problem, device, generator)
    references = op.reference(problem, inputs)
    placed = Placements(inputs, None)
    results: list[RunResult] = []
    fns = []
    for candidate in candidates:
        kernel = candidate.build(op)
        outputs = op.make_outputs(problem, device)
        rel, mx, why = check(kernel, inputs, outputs, references, op.tolerance(problem, candidate.config))
        if why is not None:
            results.append(RunResult(Status.WRONG_RESULT, error=why, rel_err=rel, max_err=mx))
            continue
        results.append(RunResult(Status.OK, rel_err=rel, max_err=mx))
        fns.append(placed.cycle(lambda own, kernel=kernel, outputs=outputs:
                                _runs(kernel, own, outputs if own is placed.inputs[0] else op.make_outputs(problem, device))))
    tol = op.tolerance(problem, first.config)
    for result, fn in checked_peers(peers, op, problem, inputs, first.target, references, tol):
        results.append(result)
        if fn is not None:  # on the first copy only: making a peer again would tune an autotuner again
            fns.append(fn)
    base = op.baseline(problem, inputs) if settings.baseline else None
    if base is not None:
        fns.append(placed.cycle(lambda own: base if own is placed.inputs[0] else op.baseline(problem, own)))
    return _Ready(together_key(candidates, settings, peers), op, problem, results, fns, base is not None,
                  first.target.l2_bytes, (lead, placed), time.perf_counter() - start)
