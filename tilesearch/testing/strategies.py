"""Conformance suite for search strategies: subclass :class:`StrategySuite` and set ``strategy``.

A strategy passes if, on a synthetic runner, it proposes only configurations of the space,
never gets a configuration measured twice, keeps within the trial budget, resumes without
re-measuring, and gives the same trials for the same seed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP
from tilesearch.tuner import tune


class StrategySuite:
    strategy: str = ""

    def _tune(self, storage: Any, trials: int, seed: int = 0, runner: Any = None) -> tuple[Any, SyntheticRunner]:
        runner = runner or SyntheticRunner()
        result = tune(
            TOY_OP, {"size": 64}, runner=runner, storage=storage,
            **{"strategy": self.strategy, "trials": trials, "seed": seed, "progress": False},
        )
        return result, runner

    def test_measures_distinct_valid_configs_within_budget(self) -> None:
        result, runner = self._tune(":memory:", trials=20)
        keys = [c.key for c in runner.calls]
        assert len(keys) == len(set(keys)) == 20
        from tilesearch import registry
        from tilesearch.target import Target

        op = registry.load(TOY_OP)
        space = op.space(op.problem(size=64), Target.from_arch("sm_90a"))
        assert all(space.is_valid(c.config) for c in runner.calls)
        assert result.best and result.best[0].status == "ok"

    def test_resume_measures_nothing_twice(self, tmp_path: Any) -> None:
        storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
        _, first = self._tune(storage, trials=8)
        _, again = self._tune(storage, trials=8)
        assert len(first.calls) == 8 and again.calls == []
        _, more = self._tune(storage, trials=12)
        assert len(more.calls) == 4
        assert not {c.key for c in more.calls} & {c.key for c in first.calls}

    def test_seeded_runs_are_reproducible(self) -> None:
        _, a = self._tune(":memory:", trials=10, seed=3)
        _, b = self._tune(":memory:", trials=10, seed=3)
        assert [c.key for c in a.calls] == [c.key for c in b.calls]

    @pytest.mark.parametrize("trials", [1])
    def test_smallest_budget(self, trials: int) -> None:
        _, runner = self._tune(":memory:", trials=trials)
        assert len(runner.calls) == 1
