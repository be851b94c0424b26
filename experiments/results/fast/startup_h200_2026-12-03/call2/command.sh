# call 2 (2026-12-03), repository root on the GPU host. Trees unpacked beside it with
#   git archive <commit> tilesearch search_spaces plugins scripts pyproject.toml | tar -x -C <dir>
# .after = 86eff25 (this session: the first re-time process's short settle, fewer storage reads),
# .before = 7955456 (the tree before this session). README's main command, kept header (each run an
# empty TileLang cache holding only NVRTC's header record), alternating, then the no-op rerun
# without and with PYTHONPYCACHEPREFIX (are the host's uncompiled modules the CLI's start?).
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export CACHE=fresh
bash scripts/time_main_command.sh cold=.after after=.after,HEADER=kept before=.before,HEADER=kept after=.after,HEADER=kept \
  before=.before,HEADER=kept after=.after,HEADER=kept before=.before,HEADER=kept > $OUT/summary.txt 2>&1
db=/tmp/main_after_6.db; cache=/tmp/main_cache_after_6
noop() {
  s=$(date +%s.%N)
  (cd .after && env "$@" PYTHONPATH=$PWD:$PYTHONPATH TILELANG_CACHE_DIR=$cache python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 progress=false storage=sqlite:///$db) > $OUT/noop.txt 2>&1
  echo "no-op rerun $* rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.2f}')")s" >> $OUT/summary.txt
}
noop X=1; noop X=2; noop PYTHONPYCACHEPREFIX=/tmp/pyc; noop PYTHONPYCACHEPREFIX=/tmp/pyc; noop PYTHONPYCACHEPREFIX=/tmp/pyc
python3 -c "import numpy, typing_extensions, pynvml; print(numpy.__file__, typing_extensions.__file__, pynvml.__file__)" >> $OUT/summary.txt 2>&1
ls -ld $(python3 -c "import os, numpy; print(os.path.dirname(numpy.__file__))")/__pycache__ >> $OUT/summary.txt 2>&1
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt) && rm $OUT/tune_main_*.txt
cat $OUT/summary.txt
