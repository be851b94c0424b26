#!/usr/bin/env bash
# The CPU machine (2 cores), 2026-12-05, at fbc1688: README's main command replayed from the recorded H100
# dataset (nothing compiled or measured), with verbose phases, then once more under cProfile; fresh storages.
set -euo pipefail
R=$PWD/experiments/results/fast/replay_database_cpu_2026-12-05
D=$PWD/experiments/data/gemm_8192x8192x8192_float16_nn_h100_80gb_hbm3.jsonl.gz
cd "$(mktemp -d)"
$OLDPWD/.venv/bin/tilesearch tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 \
  runner=replay:$D storage=sqlite:///$PWD/r1.db verbose=true progress=false > $R/verbose.txt 2>&1
$OLDPWD/.venv/bin/python -m cProfile -o r2.prof -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 \
  strategy=tpe trials=48 runner=replay:$D storage=sqlite:///$PWD/r2.db progress=false > /dev/null 2>&1
$OLDPWD/.venv/bin/python -c "import pstats; pstats.Stats('r2.prof').sort_stats('cumulative').print_stats(40)" > $R/profile.txt
