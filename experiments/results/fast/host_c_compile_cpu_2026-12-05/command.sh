#!/usr/bin/env bash
# The CPU machine (2 cores), 2026-12-05: experiments/compile_time.py, 16 sampled 8192^3 float16 GEMM
# configurations from an empty TileLang cache, one compile worker (one core), NVRTC (the default),
# alternating the tree before (d5ad99b, g++ compiles the host library's C code) and after (gcc).
# BEFORE is `git archive d5ad99b tilesearch search_spaces plugins experiments/compile_time.py`, unpacked.
# Each tree runs from its own folder: the compile pool's fork server is started with `python -m`,
# which puts the working directory ahead of PYTHONPATH (run from here, both trees' pools ran this one's code).
set -euo pipefail
BEFORE=${BEFORE:-/tmp/before}
R=experiments/results/fast/host_c_compile_cpu_2026-12-05
for i in 1 2 3; do
  (cd $BEFORE && PYTHONPATH=$BEFORE $OLDPWD/.venv/bin/python experiments/compile_time.py out=$OLDPWD/$R/before_$i configs=16 workers=1 batch=1 seed=$i) > $R/before_$i.log 2>&1
  .venv/bin/python experiments/compile_time.py out=$R/after_$i configs=16 workers=1 batch=1 seed=$i > $R/after_$i.log 2>&1
done
