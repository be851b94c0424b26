"""``xgb``: a cost-model guided search. An XGBoost ranking model, retrained whenever new trials
have finished, scores every unmeasured valid configuration (or a large random pool of them when
the space is too big to list); the best-scored ones go to the builder, with a share ``epsilon``
of random picks to keep exploring. Before the model has data it samples at random, unless it
can warm-start from records of other problems of the same op: other studies in the same
storage, and datasets named by ``transfer``. The trained model is kept with the study (user
attribute ``xgb_model``) and reloaded on resume.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from tilesearch import dataset
from tilesearch.cost_model import Featurizer, XGBRanker, XGBSettings, relevance
from tilesearch.database import TrialRecord
from tilesearch.records import Status
from tilesearch.space import Config, config_key
from tilesearch.strategy.base import Proposal, SearchContext, Strategy
from tilesearch.strategy.enumerated import candidate_key
from tilesearch.target import Target

_NOT_MEASURED = {Status.INVALID.value, Status.INTERRUPTED.value, Status.NOT_RECORDED.value, "running", "unknown"}
MODEL_ATTR = "xgb_model"


@dataclass(frozen=True)
class Group:
    """Records of one problem: where they come from, and their features and labels."""

    source: str
    x: np.ndarray
    y: np.ndarray


def _label_rows(records: Sequence[Any]) -> tuple[list[Config], list[float | None]]:
    configs, tflops = [], []
    for r in records:
        if r.status in _NOT_MEASURED or getattr(r, "duplicate_of", None) is not None:
            continue
        configs.append(r.config)
        if r.status == Status.OK.value:
            tflops.append(r.tflops if r.tflops else (1.0 / r.latency_ms if r.latency_ms else None))
        else:
            tflops.append(None)
    return configs, tflops


class XGBStrategy(Strategy):
    """Cost-model guided search (see the module docstring).

    Args:
        seed: seeds the random picks and XGBoost.
        transfer: dataset files (a list, or one string of comma-separated paths) of other
            problems of the same op to warm-start from.
        auto_transfer: also learn from the other studies of the op in the study's storage.
        epsilon: share of proposals picked at random once the model is trained.
        init: trials measured at random before the model is used, when nothing is transferred.
        pool: configurations scored per round when the space is too large to list.
        max_listed: largest space (before constraints) that is listed in full.
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
        pool: int = 4096,
        max_listed: int = 65536,
        retrain_share: int = 32,
        settings: XGBSettings | None = None,
    ) -> None:
        self.seed = seed
        self.transfer = [p for p in (transfer.split(",") if isinstance(transfer, str) else transfer) if p]
        self.auto_transfer = auto_transfer
        self.epsilon = epsilon
        self.init = init
        self.pool = pool
        self.max_listed = max_listed
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

    def sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=self.seed)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "epsilon": self.epsilon, "init": self.init, "objective": self.settings.objective,
                "transfer": [g.source for g in self.sources]}

    def _setup(self, context: SearchContext) -> None:
        self.featurizer = Featurizer(
            context.problem.op, context.op.space(context.problem, context.target), context.op.defaults
        )
        self.listed = context.space.size <= self.max_listed
        if self.listed:
            self._configs = list(context.space.enumerate())
            self._keys = [candidate_key(context, c) for c in self._configs]
            self._row = {config_key(c): i for i, c in enumerate(self._configs)}
            self._x = self._features(context, self._configs)
        for path in self.transfer:
            data = dataset.load(path)
            if data.op != context.problem.op:
                raise dataset.DatasetError(f"transfer dataset {path} is for op {data.op}, not {context.problem.op}")
            configs, tflops = _label_rows(data.rows)
            self._add_source(f"dataset:{Path(path).name}", data.problem, Target.from_dict(data.meta["target"]),
                             configs, tflops)
        if self.auto_transfer:
            self._transfer_from_storage(context)
        saved = context.db.study.user_attrs.get(MODEL_ATTR)
        if saved and saved.get("features") == self.featurizer.names:
            self.model = XGBRanker.load(saved["model"], self.settings, self.seed)
            self._trained_on = int(saved.get("trained_on", -1))
        self._ready = True

    def _features(self, context: SearchContext, configs: list[Config]) -> np.ndarray:
        if self.listed and self._x is not None:
            rows = [self._row.get(config_key(c)) for c in configs]
            if all(r is not None for r in rows):
                return self._x[rows]
        return self.featurizer.matrix(context.problem.to_dict(), configs, context.target)

    def _add_source(self, source: str, problem: dict, target: Target, configs: list[Config],
                    tflops: list[float | None]) -> None:
        if len(configs) < 2:
            return
        x = self.featurizer.matrix(problem, configs, target)
        self.sources.append(Group(source, x, relevance(tflops)))

    def _transfer_from_storage(self, context: SearchContext) -> None:
        db = context.db
        for summary in optuna.study.get_all_study_summaries(db.storage, include_best_trial=False):
            attrs = summary.user_attrs
            if (summary.study_name == db.name or attrs.get("op") != context.problem.op
                    or attrs.get("problem") == context.problem.key or "params" not in attrs):
                continue
            study = optuna.load_study(study_name=summary.study_name, storage=db.storage)
            records = [TrialRecord.from_trial(t) for t in study.get_trials(deepcopy=False) if "key" in t.user_attrs]
            configs, tflops = _label_rows(records)
            target = Target.from_dict(attrs["target"]) if "target" in attrs else context.target
            self._add_source(f"study:{summary.study_name}", attrs["params"], target, configs, tflops)

    def _candidates(self, context: SearchContext, taken: set[str]) -> tuple[list[Config], np.ndarray]:
        if self.listed:
            free = [i for i, key in enumerate(self._keys) if key not in taken]
            assert self._x is not None
            return [self._configs[i] for i in free], self._x[free]
        picked: dict[str, Config] = {}
        for _ in range(self.pool * 4):
            if len(picked) >= self.pool:
                break
            config = context.space.sample(self.rng)
            key = candidate_key(context, config)
            if key not in taken:
                picked[key] = config
        configs = list(picked.values())
        return configs, self._features(context, configs)

    def _train(self, context: SearchContext, records: list[TrialRecord]) -> None:
        configs, tflops = _label_rows(records)
        if len(configs) - self._trained_on < max(1, len(configs) // self.retrain_share):
            return
        groups = [(g.x, g.y) for g in self.sources]
        if configs and (self.sources or len(configs) >= self.init):
            groups.append((self._features(context, configs), relevance(tflops)))
        elif not self.sources:
            return
        model = XGBRanker(self.settings, self.seed)
        if model.fit(groups):
            self.model = model
            self._trained_on = len(configs)
            context.db.study.set_user_attr(
                MODEL_ATTR, {"model": model.save(), "features": self.featurizer.names, "trained_on": len(configs),
                             "sources": [g.source for g in self.sources]},
            )

    def propose(self, context: SearchContext, n: int) -> list[Proposal]:
        if not self._ready:
            self._setup(context)
        taken = context.taken()
        configs, x = self._candidates(context, taken)
        if not configs:
            return []
        self._train(context, context.db.records())
        n = min(n, len(configs))
        if self.model is None:
            return [Proposal(configs[i]) for i in self.rng.sample(range(len(configs)), n)]
        order = list(np.argsort(-self.model.predict(x), kind="stable"))
        chosen: list[int] = []
        for _ in range(n):
            if self.rng.random() < self.epsilon:
                rest = [i for i in range(len(configs)) if i not in chosen]
                chosen.append(self.rng.choice(rest))
            else:
                chosen.append(next(i for i in order if i not in chosen))
        return [Proposal(configs[i]) for i in chosen]
