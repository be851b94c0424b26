"""How many invalid configurations TPE proposes, with Optuna's split of good trials and with
tilesearch's (complete trials only): the work of ``experiments/tpe_invalid.py`` (see there)."""

from __future__ import annotations

import statistics
import warnings
from typing import Any


def invalid_proposals(op: Any, problem: Any, target: Any, *, seed: int, trials: int, complete_only: bool, in_flight: int = 8) -> int:
    import optuna

    from tilesearch.strategy.sampler import CompleteGamma

    space = op.space(problem, target)
    distributions = space.distributions()
    gamma = CompleteGamma()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=False, constant_liar=True,
                                             n_startup_trials=10, **({"gamma": gamma} if complete_only else {}))
    study = optuna.create_study(sampler=sampler)
    measured = invalid = 0
    flight = []
    while measured < trials and invalid < 50 * trials:
        gamma.watch(study)  # a batch of one, as tune's propose(n) would count before asking
        trial = study.ask(distributions)
        config = space.from_params(trial.params)
        if space.why_invalid(config):
            invalid += 1
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        flight.append((trial, config))
        if len(flight) >= in_flight:
            done, cfg = flight.pop(0)
            measured += 1
            study.tell(done, op.estimate(problem, cfg, target))
    return invalid


def main(argv: list[str]) -> int:
    import optuna

    from tilesearch import registry
    from tilesearch.target import Target

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    opts = dict(a.split("=", 1) for a in argv)
    seeds, trials = int(opts.pop("seeds", 10)), int(opts.pop("trials", 42))
    if opts.pop("raster", "row") == "column":  # the space as at a0748d5, where the storm was seen
        import search_spaces.gemm

        search_spaces.gemm.SEARCH_COLUMN_RASTER = True
    params = {"m": 8192, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn", **opts}
    op = registry.load("gemm")
    problem = op.problem(**{k: int(v) if str(v).isdigit() else v for k, v in params.items()})
    target = Target.from_arch("sm_90a")
    rows = []
    print(f"{problem} (raster searched: {'column' in op.space(problem, target)['raster'].values()}): "
          f"invalid proposals before {trials} valid ones measured")
    print("seed  optuna split  measured-only split")
    for seed in range(seeds):
        rows.append((invalid_proposals(op, problem, target, seed=seed, trials=trials, complete_only=False),
                     invalid_proposals(op, problem, target, seed=seed, trials=trials, complete_only=True)))
        print(f"{seed:4d}  {rows[-1][0]:12d}  {rows[-1][1]:19d}", flush=True)
    for name, column in (("optuna split", [r[0] for r in rows]), ("measured-only split", [r[1] for r in rows])):
        print(f"{name}: median {statistics.median(column):g}, worst {max(column)}")
    return 0

