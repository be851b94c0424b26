"""How many invalid configurations TPE proposes, with Optuna's split of good trials, with
tilesearch's (complete trials only), and with that split and the constraints told
(:class:`~tilesearch.strategy.sampler.ValidTPE`): the work of ``experiments/tpe_invalid.py`` (see there)."""

from __future__ import annotations

import statistics
import warnings
from typing import Any


def invalid_proposals(op: Any, problem: Any, target: Any, *, seed: int, trials: int, complete_only: bool,
                      told: bool = False, in_flight: int = 8) -> int:
    import optuna

    from tilesearch.strategy.sampler import CompleteGamma, ValidTPE, validity

    space = op.space(problem, target)
    distributions = space.distributions()
    gamma = CompleteGamma()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sampler = (ValidTPE if told else optuna.samplers.TPESampler)(
            seed=seed, multivariate=True, group=False, constant_liar=True, n_startup_trials=10,
            **({"gamma": gamma} if complete_only else {}))
    if told:
        sampler.valid = validity(space)
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
    if opts.pop("replay", "sampler") == "tune":
        print_tune_replay(seeds)
        return 0
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
    print("seed  optuna split  measured-only split  and told the constraints (tilesearch's tpe)")
    for seed in range(seeds):
        rows.append((invalid_proposals(op, problem, target, seed=seed, trials=trials, complete_only=False),
                     invalid_proposals(op, problem, target, seed=seed, trials=trials, complete_only=True),
                     invalid_proposals(op, problem, target, seed=seed, trials=trials, complete_only=True, told=True)))
        print(f"{seed:4d}  {rows[-1][0]:12d}  {rows[-1][1]:19d}  {rows[-1][2]:41d}", flush=True)
    for i, name in enumerate(("optuna split", "measured-only split", "told the constraints")):
        column = [r[i] for r in rows]
        print(f"{name}: median {statistics.median(column):g}, worst {max(column)}")
    return 0



def tune_replay(seeds: int, told: bool, trials: int = 48) -> list[tuple[int, float, float]]:
    """README's main command (``strategy=tpe``, 48 trials, 8192^3 float16) replayed through
    ``tune`` on the CPU: a synthetic runner returns :func:`~tilesearch.testing.synthetic.gemm_latency`
    (made up, with the real space's shape), a null builder "compiles" at once with 15 workers' worth
    of pipeline, as on the GPU host. Per seed: the invalid proposals, the tuning process's seconds
    of proposing and recording (what the GPU waits for), and the best latency found as a share of
    the space's best. ``told=False`` runs TPE as it was before it was told the constraints."""
    import tempfile

    from tilesearch import registry
    from tilesearch.strategy import sampler
    from tilesearch.target import Target
    from tilesearch.testing.synthetic import gemm_latency, tune_gemm

    target = Target.from_arch("sm_90a", gpu="synthetic")
    op = registry.load("gemm")
    problem = op.problem(m=8192, n=8192, k=8192, dtype="float16")
    params = problem.to_dict()
    best = min(ms for c in op.space(problem, target).enumerate() if (ms := gemm_latency(params, c, target)) is not None)
    rows = []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            result, calls = tune_gemm(params, strategy=sampler.tpe(seed) if told else _untold_tpe(seed), trials=trials,
                                      seed=seed, storage=f"sqlite:///{tmp}/study.db")
        found = min(gemm_latency(params, c.config, target) or float("inf") for c in calls)
        rows.append((result.statuses.get("invalid", 0), result.phases["propose"] + result.phases["database"],
                     best / found))
    return rows


def _untold_tpe(seed: int) -> Any:
    """``strategy=tpe`` as it was before it was told the constraints (commit ``6cb093b``): Optuna's
    TPE with :class:`~tilesearch.strategy.sampler.CompleteGamma`, its first batch drawn knob by knob."""
    import optuna

    from tilesearch.strategy.sampler import CompleteGamma, SamplerStrategy

    gamma = CompleteGamma()
    return SamplerStrategy("tpe", lambda s: optuna.samplers.TPESampler(
        seed=s, multivariate=True, group=False, constant_liar=True, n_startup_trials=10, gamma=gamma), seed,
        watch=lambda context: gamma.watch(context.db.study))


def print_tune_replay(seeds: int) -> None:
    print("README's main command replayed on the CPU (synthetic latencies): per seed, strategy=tpe told the "
          "constraints | as before (Optuna's TPE with CompleteGamma, a knob-by-knob first batch)")
    print("seed  invalid  propose+database s  best found  |  invalid  propose+database s  best found")
    told, plain = tune_replay(seeds, True), tune_replay(seeds, False)
    for seed, (a, b) in enumerate(zip(told, plain)):
        print(f"{seed:4d}  {a[0]:7d}  {a[1]:18.2f}  {a[2]:10.3f}  |  {b[0]:7d}  {b[1]:18.2f}  {b[2]:10.3f}")
    for name, rows in (("told", told), ("before", plain)):
        print(f"{name}: median invalid {statistics.median(r[0] for r in rows):g}, median propose+database "
              f"{statistics.median(r[1] for r in rows):.2f} s, best found median {statistics.median(r[2] for r in rows):.3f}, "
              f"worst {min(r[2] for r in rows):.3f}")
