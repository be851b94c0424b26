"""A tuning process on the toy op with the synthetic runner, for tests that start processes.

    python -m tilesearch.testing.worker storage=URL study=NAME trials=40 \\
        [strategy=random seed=0 heartbeat=1 depth=4 delay=0.02 log=FILE size=64]

``depth`` is how many trials the tuning process keeps in flight, ``delay`` how long each synthetic run
takes, ``log`` a file that gets a line per run (see :class:`SyntheticRunner`). Prints one JSON
line with what this tuning process measured.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tilesearch.builder import NullBuilder
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP


def synthetic_runner(settings: Any, delay: float = 0.0, log: str | None = None) -> SyntheticRunner:
    """Runner factory for :func:`tilesearch.distributed.tune_parallel` in tests."""
    return SyntheticRunner(delay=delay, log=log)


def claim_race(storage: str, study: str, key: str, barrier: Any, verdicts: Any) -> None:
    """One of several processes that claim ``key`` at once (spawned by a test): opens a trial,
    waits for the others, claims, reports its verdict, and keeps the trial open until all did."""
    from optuna.distributions import IntDistribution

    from tilesearch.claim import Claims
    from tilesearch.database import TuningDatabase

    db = TuningDatabase(storage, study)
    claims = Claims(db)
    trial = db.ask({"x": IntDistribution(0, 10)})
    trial.set_user_attr("key", key)
    barrier.wait()
    verdicts.put((trial.number, claims.claim(trial.number, key).verdict.value))
    barrier.wait()


def main(argv: list[str] | None = None) -> int:
    from tilesearch.cli import parse_pairs, split_settings
    from tilesearch.tuner import TuneSettings, tune

    pairs = parse_pairs(sys.argv[1:] if argv is None else argv)
    delay = float(pairs.pop("delay", 0))
    log = pairs.pop("log", None)
    size = int(pairs.pop("size", 64))
    builder = NullBuilder()
    builder.workers = max(1, int(pairs.pop("depth", 2)) - 1)
    settings, rest = split_settings(pairs, TuneSettings.keys())
    if rest:
        raise SystemExit(f"unknown keys {sorted(rest)}")
    result = tune(
        TOY_OP, {"size": size}, runner=SyntheticRunner(delay=delay, log=log), builder=builder,
        settings=TuneSettings(**{"progress": False, **settings}),
    )
    print(json.dumps({"study": result.study, "measured_now": result.measured_now, "statuses": result.statuses}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
