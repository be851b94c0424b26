"""``xgb``: a cost-model guided search. An XGBoost ranking model, retrained whenever new trials
have finished, scores candidates; the best-scored ones go to the builder, with a share
``epsilon`` of random picks to keep exploring. A small space (``max_listed`` configurations
before constraints, or at most ``max_scored`` valid ones by the share of valid draws) is listed
once and every unmeasured valid configuration is scored each round. A large one (the full GEMM
space has about 45,000 valid configurations) is never listed: scoring all of them each round
costs seconds, mostly in computing features. Each round instead scores a pool that carries the
search on: the ``keep`` best-scored candidates of the previous round, every configuration one
knob change away from the ``local`` best measured ones and from the previous round's ``local``
best-scored ones (a local search around what is known to be fast and what the model expects
to be), and ``fresh`` new valid configurations drawn at random (at most ``max_draws`` draws);
features are computed once per configuration. The model's trees are added to the op's analytic estimate
(the operator's :meth:`~tilesearch.op.Operator.estimate`, a roofline for GEMM) scaled by ``prior``, so they
learn what the estimate gets wrong. Before the model has ``init`` measurements of its own it
measures an initial design: configurations the estimate ranks near the top, each as unlike
those already picked as possible (differing in the most knobs), so that the first model sees
the knobs the estimate cannot tell apart varied. It can warm-start from records of other
problems of the same op: other studies in the same storage, and datasets named by
``transfer``; it then skips the initial design, and each problem (the one tuned here and each
other one) has the same say in training, however many records it has. The trained model is
kept with the study (user attribute ``xgb_model``) and reloaded on resume.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from tilesearch import dataset
from tilesearch.cost_model import Featurizer, TrainingGroup, XGBRanker, XGBSettings, relevance
from tilesearch.cost_model.xgb import labels
from tilesearch.database import HELDOUT_ATTR, TrialRecord, studies, study_trials
from tilesearch.records import has_result, is_correct, speeds
from tilesearch.space import Config, config_key
from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import candidate_key
from tilesearch.target import Target

MODEL_ATTR = "xgb_model"
PROBE_DRAWS = 1024  # draws from which the share of valid ones estimates a large space's valid configurations


@dataclass(frozen=True)
class Group:
    """Records of one problem: where they come from, their features, labels and prior."""

    source: str
    x: np.ndarray
    y: np.ndarray
    margin: np.ndarray


class XGBStrategy(Strategy):
    """Cost-model guided search (see the module docstring).

    Args:
        seed: seeds the random picks and XGBoost.
        transfer: dataset files (a list, or one string of comma-separated paths) of other
            problems of the same op to warm-start from.
        auto_transfer: also learn from the other studies of the op in the study's storage, except
            those held out to certify a range (:data:`~tilesearch.database.HELDOUT_ATTR`).
        epsilon: share of proposals picked at random once the model is trained.
        init: trials of the initial design measured before the model is used, when nothing is
            transferred.
        prior: weight of the op's analytic estimate (log2 of relative throughput) in the score;
            0 leaves it out (the initial design is then random).
        init_pool: the initial design picks among configurations whose estimate is within this
            factor of the best estimate (and at least the ``init`` best).
        max_listed: largest space (before constraints) that is listed in full up front.
        max_scored: a larger space is listed too if its valid configurations, estimated from
            the first ``PROBE_DRAWS`` draws, are at most this many (and the space, before
            constraints, at most ``max_listed_sparse``); else it gets pools.
        fresh: random valid configurations added to each round's pool.
        keep: best-scored unmeasured candidates a round's pool passes on to the next.
        local: measured configurations (the fastest) and previous best-scored ones whose
            one-knob neighbours join each round's pool.
        max_draws: configurations drawn (valid or not) per round for the fresh share of a pool.
        max_listed_sparse: largest space (before constraints) that is ever listed.
        retrain_share: retrain once ``1/retrain_share`` of the results are new (at least one):
            after every result early on, less often as they pile up.
        settings: the model's training settings.
    """

    name = "xgb"

    def __init__(
        self,
        seed: int = 0,
        *,
        transfer: str | Sequence[str] = (),
        auto_transfer: bool = True,
        epsilon: float = 0.1,
        init: int = 8,
        prior: float = 1.0,
        init_pool: float = 0.85,
        max_listed: int = 8192,
        max_scored: int = 4096,
        fresh: int = 512,
        keep: int = 512,
        local: int = 8,
        max_draws: int = 32768,
        max_listed_sparse: int = 1 << 20,
        retrain_share: int = 32,
        settings: XGBSettings | None = None,
    ) -> None:
        self.seed = seed
        self.transfer = [p for p in (transfer.split(",") if isinstance(transfer, str) else transfer) if p]
        self.auto_transfer = auto_transfer
        self.epsilon = epsilon
        self.init = init
        self.prior = prior
        self.init_pool = init_pool
        self.max_listed = max_listed
        self.max_scored = max_scored
        self.fresh = fresh
        self.keep = keep
        self.local = local
        self.max_draws = max_draws
        self.max_listed_sparse = max_listed_sparse
        self.retrain_share = retrain_share
        self.settings = settings or XGBSettings()
        self.rng = random.Random(seed)
        self.model: XGBRanker | None = None
        self.sources: list[Group] = []
        self._ready = False
        self._trained_on = -1
        self._configs: list[Config] = []
        self._keys: list[str] = []
        self._row: dict[str, int] = {}
        self._x: np.ndarray | None = None
        self._m: np.ndarray | None = None
        self._pooled = False  # large space: scored in pools (decided on the first round)
        self._cache: dict[str, tuple[np.ndarray, float]] = {}  # features and prior per pooled config
        self._carried: list[Config] = []  # the previous round's best-scored unmeasured candidates

    def sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=self.seed)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "epsilon": self.epsilon, "init": self.init, "prior": self.prior,
                "objective": self.settings.objective, "transfer": [g.source for g in self.sources]}

    def _setup(self, context: SearchContext) -> None:
        self.featurizer = Featurizer(context.op, context.op.space(context.problem, context.target))
        self.listed = False
        if context.space.size <= self.max_listed:
            self._list(context)
        for path in self.transfer:
            data = dataset.load(path)
            if data.op != context.problem.op:
                raise dataset.DatasetError(f"transfer dataset {path} is for op {data.op}, not {context.problem.op}")
            configs, tflops = labels(data.rows)
            self._add_source(f"dataset:{Path(path).name}", data.problem, Target.from_dict(data.meta["target"]),
                             configs, tflops)
        if self.auto_transfer:
            self._transfer_from_storage(context)
        saved = context.db.study.user_attrs.get(MODEL_ATTR)
        if saved and saved.get("features") == self.featurizer.names and saved.get("prior") == self.prior:
            self.model = XGBRanker.load(saved["model"], self.settings, self.seed)
            self._trained_on = int(saved.get("trained_on", -1))
        self._ready = True

    def _list(self, context: SearchContext) -> None:
        """Lists the valid configurations, with their keys, features and prior, once."""
        self.listed = True
        self._configs = list(context.space.enumerate())
        self._keys = [candidate_key(context, c) for c in self._configs]
        self._row = {config_key(c): i for i, c in enumerate(self._configs)}
        self._x = self.featurizer.matrix(context.problem.to_dict(), self._configs, context.target)
        self._m = self._margin(context.problem.to_dict(), self._configs, context.target)

    def _margin(self, problem: dict, configs: list[Config], target: Target) -> np.ndarray:
        return self.prior * self.featurizer.estimate(problem, configs, target)

    def _features(self, context: SearchContext, configs: list[Config]) -> tuple[np.ndarray, np.ndarray]:
        if self.listed and self._x is not None and self._m is not None:
            rows = [self._row.get(config_key(c)) for c in configs]
            if all(r is not None for r in rows):
                return self._x[rows], self._m[rows]
        problem = context.problem.to_dict()
        return (self.featurizer.matrix(problem, configs, context.target),
                self._margin(problem, configs, context.target))

    def _add_source(self, source: str, problem: dict, target: Target, configs: list[Config],
                    tflops: list[float | None]) -> None:
        if len(configs) < 2:
            return
        x = self.featurizer.matrix(problem, configs, target)
        self.sources.append(Group(source, x, relevance(tflops), self._margin(problem, configs, target)))

    def _transfer_from_storage(self, context: SearchContext) -> None:
        db = context.db
        for summary in studies(db.storage):
            attrs = summary.user_attrs
            if (summary.study_name == db.name or attrs.get("op") != context.problem.op
                    or attrs.get("problem") == context.problem.key or "params" not in attrs
                    or attrs.get(HELDOUT_ATTR)):
                continue
            records = [TrialRecord.from_trial(t) for t in study_trials(db.storage, summary) if "key" in t.user_attrs]
            configs, tflops = labels(records)
            target = Target.from_dict(attrs["target"]) if "target" in attrs else context.target
            self._add_source(f"study:{summary.study_name}", attrs["params"], target, configs, tflops)

    def _candidates(self, context: SearchContext, taken: set[str]) -> tuple[list[Config], np.ndarray, np.ndarray]:
        if not self.listed:
            configs = self._pool(context, taken) if self._pooled else self._probe(context, taken)
            if configs is not None:
                return configs, *self._pool_features(context, configs)
            self._list(context)
        free = [i for i, key in enumerate(self._keys) if key not in taken]
        assert self._x is not None and self._m is not None
        return [self._configs[i] for i in free], self._x[free], self._m[free]

    def _draw(self, context: SearchContext, taken: set[str], want: int, draws: int) -> tuple[dict[str, Config], float]:
        """Up to ``want`` valid configurations not in ``taken``, drawn by rejection within
        ``draws`` draws; also the share of the draws that were valid."""
        space, picked, valid, done = context.space, {}, 0, 0
        while done < draws and len(picked) < want:
            done += 1
            config = space.draw(self.rng)
            if space.why_invalid(config) is None:
                valid += 1
                key = candidate_key(context, config)
                if key not in taken:
                    picked[key] = config
        return picked, valid / max(done, 1)

    def _probe(self, context: SearchContext, taken: set[str]) -> list[Config] | None:
        """First round of a space not listed up front: ``None`` (list it) if the share of valid
        draws among the first ``PROBE_DRAWS`` puts its valid configurations at ``max_scored`` or
        fewer; else the space is scored in pools from now on, starting with the draws."""
        space = context.space
        picked, share = self._draw(context, taken, self.fresh, min(PROBE_DRAWS, self.max_draws))
        if space.size <= self.max_listed_sparse and share * space.size <= self.max_scored:
            return None
        self._pooled = True
        more, _ = self._draw(context, taken | set(picked), self.fresh - len(picked),
                             self.max_draws - min(PROBE_DRAWS, self.max_draws))
        return list({**picked, **more}.values())

    def _pool(self, context: SearchContext, taken: set[str]) -> list[Config]:
        """This round's pool of a large space (see the module docstring)."""
        measured = [r for r in context.db.records() if is_correct(r)]
        speed = speeds(measured)  # by ratio once a trial raced (see records.speeds)
        fastest = [r for _, _, r in sorted(zip((-s for s in speed), range(len(measured)), measured))][:self.local]
        centres = [r.config for r in fastest] + self._carried[:self.local]
        pool: dict[str, Config] = {}
        for config in self._carried + [n for c in centres for n in context.space.neighbours(c)]:
            key = candidate_key(context, config)
            if key not in taken:
                pool.setdefault(key, config)
        fresh, _ = self._draw(context, taken | set(pool), self.fresh, self.max_draws)
        return list({**pool, **fresh}.values())

    def _pool_features(self, context: SearchContext, configs: list[Config]) -> tuple[np.ndarray, np.ndarray]:
        """Features and prior of pooled configurations, each computed once."""
        keys = [config_key(c) for c in configs]
        new = [i for i, key in enumerate(keys) if key not in self._cache]
        if new:
            x, m = self._features(context, [configs[i] for i in new])
            self._cache.update({keys[i]: (x[j], float(m[j])) for j, i in enumerate(new)})
        if not configs:
            return np.zeros((0, len(self.featurizer.names))), np.zeros(0)
        return np.array([self._cache[k][0] for k in keys]), np.array([self._cache[k][1] for k in keys])

    def _train(self, context: SearchContext, records: list[TrialRecord]) -> None:
        configs, tflops = labels(records)
        if len(configs) - self._trained_on < max(1, len(configs) // self.retrain_share):
            return
        if not self.sources and len(configs) < self.init:
            return
        labelled = [(g.x, g.y, g.margin) for g in self.sources]
        if configs:
            x, margin = self._features(context, configs)
            labelled.append((x, relevance(tflops), margin))
        # every problem has the same say, however many records it has: the rows of each group
        # weigh rows / (groups x group rows), so that a few trials measured here are not drowned
        # by a whole sweep of another shape
        rows = sum(len(y) for _, y, _ in labelled)
        groups = [TrainingGroup(x, y, margin, rows / (len(labelled) * len(y))) for x, y, margin in labelled]
        model = XGBRanker(self.settings, self.seed)
        if model.fit(groups):
            self.model = model
            self._trained_on = len(configs)
            context.db.study.set_user_attr(
                MODEL_ATTR, {"model": model.save(), "features": self.featurizer.names, "trained_on": len(configs),
                             "prior": self.prior, "sources": [g.source for g in self.sources]},
            )

    def _initial(self, context: SearchContext, configs: list[Config], margin: np.ndarray, n: int) -> list[int]:
        """``n`` picks of the initial design: among the configurations whose estimate is near the
        best, greedily the one that differs in the most knobs from the configurations measured,
        in flight or picked (ties: the better estimate, then at random). Without an estimate
        (``prior`` 0, or an op that has none) every candidate is near the best: a space-filling
        design."""
        if self.prior <= 0:
            return self.rng.sample(range(len(configs)), n)
        pool = np.flatnonzero(margin >= margin.max() + self.prior * math.log2(self.init_pool))
        if len(pool) < n:
            pool = np.argsort(-margin, kind="stable")[:n]
        names = list(context.space.names)
        values: dict[str, dict[Any, int]] = {k: {} for k in names}

        def codes(rows: Sequence[Config]) -> np.ndarray:
            return np.array([[values[k].setdefault(c.get(k), len(values[k])) for k in names] for c in rows],
                            dtype=np.int64).reshape(len(rows), len(names))

        candidates = codes([configs[i] for i in pool])
        others = codes([r.config for r in context.db.records() if has_result(r)])
        noise = np.array([self.rng.random() for _ in pool])
        picked: list[int] = []  # positions in pool
        for _ in range(min(n, len(pool))):
            spread = (candidates[:, None, :] != others[None, :, :]).sum(axis=2).min(axis=1) if len(others) \
                else np.zeros(len(pool))
            spread[picked] = -1
            best = int(np.lexsort((noise, margin[pool], spread))[-1])
            picked.append(best)
            others = np.vstack([others, candidates[best:best + 1]])
        return [int(pool[i]) for i in picked]

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if not self._ready:
            self._setup(context)
        taken = context.taken()
        configs, x, margin = self._candidates(context, taken)
        if not configs:
            return []
        self._train(context, context.db.records())
        n = min(n, len(configs))
        if self.model is None:
            chosen = self._initial(context, configs, margin, n)
            self._carry(configs, margin, chosen)
            return [Proposal(configs[i]) for i in chosen]
        score = self.model.predict(x, margin)
        noise = np.array([self.rng.random() for _ in range(len(configs))])
        order = list(np.lexsort((noise, -score)))
        chosen: list[int] = []
        for _ in range(n):
            if self.rng.random() < self.epsilon:
                rest = [i for i in range(len(configs)) if i not in chosen]
                chosen.append(self.rng.choice(rest))
            else:
                chosen.append(next(i for i in order if i not in chosen))
        self._carry(configs, score, chosen)
        return [Proposal(configs[i]) for i in chosen]

    def rank(self, context: SearchContext, configs: Sequence[Config]) -> list[float] | None:
        """The model's scores of ``configs`` (trained on every result in), or ``None`` before it has one."""
        if not self._ready or not configs:
            return None
        self._train(context, context.db.records())
        if self.model is None:
            return None
        problem = context.problem.to_dict()
        x = self.featurizer.matrix(problem, list(configs), context.target)
        return [float(s) for s in self.model.predict(x, self._margin(problem, list(configs), context.target))]

    def _carry(self, configs: list[Config], score: np.ndarray, chosen: list[int]) -> None:
        """Keeps a pooled round's ``keep`` best-scored candidates not chosen for the next round."""
        if self._pooled:
            skip = set(chosen)
            order = np.argsort(-score, kind="stable")
            self._carried = [configs[i] for i in order if i not in skip][:self.keep]
