"""Strategies that are an Optuna sampler: ``tpe`` (and any sampler passed in)."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from tilesearch.space import config_key
from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import candidate_key


class SamplerStrategy(Strategy):
    """Lets an Optuna sampler choose. Configurations it picks that a constraint rejects are
    recorded as pruned (TPE then ranks them with the bad trials, see :class:`CompleteGamma`) and
    cost no compilation. With ``valid_start``, the proposals made before any trial has finished
    are valid configurations drawn uniformly, not the sampler's knob-by-knob draws. ``blind`` is
    the sampler's ``n_startup_trials``: it draws at random until that many trials have finished."""

    def __init__(self, name: str, make_sampler: Callable[[int], optuna.samplers.BaseSampler], seed: int = 0,
                 watch: Callable[[SearchContext], None] | None = None, valid_start: bool = False,
                 blind: int = 0) -> None:
        self.name = name
        self.seed = seed
        self.blind = blind  # the sampler's start-up trials, drawn at random (Strategy.blind)
        self._make = make_sampler
        self._watch = watch  # told the search before each batch of proposals (the study, the space)
        # the first batch: a sampler learns the knobs from finished trials, so before any it
        # draws each knob on its own, over invalid configurations too (10 of README's first 19)
        self._start = random.Random(seed) if valid_start else None
        self._started: Any = None  # the study seen with a finished trial: past its first batch for good

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._make(self.seed)

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if self._watch is not None:
            self._watch(context)
        if self._start is not None and self._started is not context.db.study:
            if any(t.state.is_finished() for t in context.db.trials()):
                self._started = context.db.study  # no need to read its trials for this again
            else:
                start = self._valid_start(context, n)
                if start is not None:
                    return start
        return [context.ask() for _ in range(n)]

    def _valid_start(self, context: SearchContext, n: int) -> list[Proposal] | None:
        """``n`` distinct valid configurations drawn uniformly (``Space.sample``), none taken;
        ``None`` where valid ones are too rare to draw (the sampler proposes then)."""
        assert self._start is not None
        taken, keys, out = context.taken(), set(), []
        for _ in range(20 * n):
            if len(out) == n:
                break
            try:
                config = context.space.sample(self._start)
            except RuntimeError:
                return None
            key = config_key(config)
            if key not in keys and candidate_key(context, config) not in taken:
                keys.add(key)
                out.append(Proposal(config))
        return out


class CompleteGamma:
    """TPE's split of good trials from bad (Optuna's default: a tenth of them, at most 25),
    counted over the study's complete trials only.

    TPE counts pruned trials too, and fills its good group with them whenever fewer complete
    trials than that exist. Our pruned trials are the configurations a constraint rejected, so a
    search whose first random draws were mostly invalid took those as good and went on proposing
    invalid ones: the README's 8192^3 TPE command on an H100 made 207 invalid proposals and
    measured its first trial after 33.6 s (19 and 15.6 s in a run whose first draws were luckier),
    and chose a kernel 4% slower. Counted over complete trials, the good group holds measured
    configurations only and every rejected one ranks with the bad.

    The complete trials are counted once per batch of proposals (:meth:`watch`), not at every
    ask: TPE already reads the whole study at each ask, and no trial of the batch completes
    before the batch is proposed."""

    def __init__(self) -> None:
        self.complete: int | None = None

    def watch(self, study: optuna.Study) -> None:
        self.complete = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def __call__(self, n: int) -> int:
        return min(math.ceil(0.1 * (n if self.complete is None else self.complete)), 25)


REDRAWS = 8  # joint TPE draws a proposal may take, beyond the first, before a rejected one is recorded
START_DRAWS = 200  # uniform draws a proposal of the random start may take to find a valid configuration
STARTUP = 10  # trials a sampler draws at random before its model steers it (Optuna's n_startup_trials)


class ValidTPE(optuna.samplers.TPESampler):
    """Multivariate TPE that proposes configurations a constraint accepts.

    Each configuration a constraint rejects costs a trial that is opened, sampled and recorded
    as pruned (some 70 ms of the tuning process, while the GPU waits for its next kernel), and
    TPE proposes many: 44 of the 52-55 invalid proposals of README's 8192^3 command on an H100
    came after its random start (RESULTS.md, fast-tuning issue), about half of what it
    proposed there. TPE draws candidates from its density of good trials and takes the one that
    scores best against the bad ones; here that score is the lowest possible for a candidate a
    constraint rejects, so the best valid candidate of the draw is taken (the density restricted
    to valid configurations). Where a draw holds no valid candidate, TPE draws again, up to
    :data:`REDRAWS` times, and then returns the last, which is recorded as pruned as before.
    The random start draws uniformly over the valid configurations instead of one knob at a
    time over all of them (11 of those 55 invalid proposals; its first batch, before any trial
    shows the knobs, comes from :class:`SamplerStrategy`'s ``valid_start``). ``valid`` is told
    before each batch of proposals (:func:`tpe`); without it this is Optuna's TPE.

    The score is Optuna's private ``_compute_acquisition_func``; an Optuna without it leaves
    only the redraws."""

    valid: Callable[[dict], bool] | None = None
    _drawing: dict | None = None  # the joint draw's search space, while TPE samples it

    def __init__(self, *args: Any, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, seed=seed, **kwargs)
        self._start = optuna.samplers.RandomSampler(seed=seed)  # the random start's valid draws

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        self._drawing = search_space
        try:
            params = super().sample_relative(study, trial, search_space)
            if not params and search_space and self.valid is not None:  # the random start
                return self._random_valid(study, trial, search_space)
            for _ in range(REDRAWS):
                if not params or self.valid is None or self.valid(params):
                    break
                params = super().sample_relative(study, trial, search_space)
        finally:
            self._drawing = None
        return params

    def _random_valid(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        """A uniform draw over the valid configurations (by rejection, as many tries as
        :data:`START_DRAWS`), else nothing: each knob is then drawn on its own, as in Optuna."""
        for _ in range(START_DRAWS):
            params = {name: self._start.sample_independent(study, trial, name, dist)
                      for name, dist in search_space.items()}
            if self.valid is None or self.valid(params):
                return params
        return {}

    def _compute_acquisition_func(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        scores = super()._compute_acquisition_func(*args, **kwargs)
        samples = args[0] if args else None  # Optuna 4-5: (samples, mpe_below, mpe_above)
        if self.valid is None or not self._drawing or not isinstance(samples, dict) or not samples:
            return scores
        count = len(next(iter(samples.values())))
        ok = np.array([self.valid({name: dist.to_external_repr(samples[name][i])
                                   for name, dist in self._drawing.items() if name in samples})
                       for i in range(count)])
        return np.where(ok, scores, -np.inf) if ok.any() else scores


def validity(space: Any) -> Callable[[dict], bool]:
    """Whether TPE's joint draw ``params`` (its knobs of more than one value) is a valid
    configuration of ``space``, the single-valued knobs taken at their value."""
    single = {name: (d.choices[0] if isinstance(d, optuna.distributions.CategoricalDistribution) else d.low)
              for name, d in space.distributions().items() if d.single()}

    def valid(params: dict) -> bool:
        try:
            return space.why_invalid(space.from_params({**single, **params})) is None
        except (KeyError, ValueError, TypeError):  # a draw over other knobs (a study of another space): no verdict
            return True

    return valid


class _TpeWatch:
    """What :func:`tpe`'s samplers are told before each batch of proposals: the study, for the
    gamma's count of complete trials, and the space, for :class:`ValidTPE`'s redraws."""

    def __init__(self) -> None:
        self.gamma = CompleteGamma()
        self.samplers: list[ValidTPE] = []

    def __call__(self, context: SearchContext) -> None:
        self.gamma.watch(context.db.study)
        valid = validity(context.space)
        for sampler in self.samplers:
            sampler.valid = valid


def tpe(seed: int = 0) -> SamplerStrategy:
    """Optuna's TPE, multivariate, with a constant liar so that trials in flight steer it away,
    its good trials counted over measured ones (:class:`CompleteGamma`), its joint draws redrawn
    while a constraint rejects them (:class:`ValidTPE`)."""
    watch = _TpeWatch()

    def make(s: int) -> optuna.samplers.TPESampler:
        options: dict[str, Any] = dict(seed=s, multivariate=True, group=False, constant_liar=True, n_startup_trials=STARTUP)
        with warnings.catch_warnings():  # Optuna 4.9 marks gamma for removal in 6.0: then the default split
            warnings.simplefilter("ignore", FutureWarning)
            try:
                sampler = ValidTPE(**options, gamma=watch.gamma)
            except TypeError:
                sampler = ValidTPE(**options)
        watch.samplers.append(sampler)
        return sampler

    return SamplerStrategy("tpe", make, seed, watch=watch, valid_start=True, blind=STARTUP)


def gp(seed: int = 0) -> SamplerStrategy:
    """Optuna's Gaussian-process sampler (log expected improvement; categorical knobs through a
    Hamming-type kernel). Not in the registry: it is compared with ``xgb`` by
    ``experiments/field_benchmark.py``, and its fitting time grows with the trials."""
    return SamplerStrategy(
        "gp", lambda s: optuna.samplers.GPSampler(seed=s, n_startup_trials=STARTUP, deterministic_objective=True), seed,
        blind=STARTUP,
    )


class FinishedOnceCmaEs(optuna.samplers.CmaEsSampler):
    """Optuna's CMA-ES, its completed trials gathered once each. Optuna's ``_get_trials`` goes
    through every trial of the study at every ask, so a study of ``n`` trials costs ``n**2``
    steps; on a constrained space most asks are configurations a constraint rejects (told pruned,
    which CMA-ES ignores), and one field benchmark run of 168 measured configurations made 8,573
    trials and spent 21 of its 57 s there. A finished trial never changes (Optuna refuses to
    update one), so the trials up to the first unfinished one are gathered once; the rest are
    looked at again. The same trials in the same order, so the same proposals
    (``tests/test_cmaes.py``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # study id -> (its storage, the finished prefix's length, its complete trials); the storage
        # is kept and compared, not its id(), which a later storage may reuse
        self._gathered: dict[int, tuple[Any, int, list[Any]]] = {}

    def _get_trials(self, study: optuna.Study) -> list[Any]:
        if self._consider_pruned_trials:  # pruned trials' values are rewritten per call there
            return super()._get_trials(study)
        trials = study._get_trials(deepcopy=False, use_cache=True)
        storage, done, complete = self._gathered.get(study._study_id, (None, 0, []))
        if storage is not study._storage:
            done, complete = 0, []
        while done < len(trials) and trials[done].state.is_finished():
            if trials[done].state == TrialState.COMPLETE:
                complete.append(trials[done])
            done += 1
        self._gathered[study._study_id] = (study._storage, done, complete)
        return complete + [t for t in trials[done:] if t.state == TrialState.COMPLETE]


def cmaes(seed: int = 0) -> SamplerStrategy:
    """Optuna's CMA-ES with margin (for integer knobs: ``PowerOfTwo`` knobs are searched over
    their exponent). CMA-ES has no model of categorical knobs: Optuna draws those at random
    (independent sampling), which is what this comparison measures too. Needs the ``cmaes``
    package (the ``bench`` extra)."""
    return SamplerStrategy(
        "cmaes",
        lambda s: FinishedOnceCmaEs(seed=s, with_margin=True, n_startup_trials=STARTUP, warn_independent_sampling=False),
        seed,
        blind=STARTUP,
    )
