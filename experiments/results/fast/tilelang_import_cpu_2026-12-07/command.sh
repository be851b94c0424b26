# Run as `bash experiments/results/fast/tilelang_import_cpu_2026-12-07/command.sh` on the 2-core CPU machine (no GPU),
# 2026-12-07: the compile pool's fork server warm-up (`import tilesearch.builder.warm`: TileLang, and NVRTC's header where
# NVRTC is chosen) and the measuring worker's (`import torch`, then `measure.warm_up()`), each in a fresh process,
# alternating the tree before (BEFORE, a worktree of 44fda47) and after (this tree), 5 pairs; the header's record kept.
set -eu
D=$PWD/experiments/results/fast/tilelang_import_cpu_2026-12-07
BEFORE=${BEFORE:-/tmp/before-44fda47}
[ -d $BEFORE ] || git worktree add -f $BEFORE 44fda47 > /dev/null
PY=$PWD/.venv/bin/python
fork='import time; t = time.perf_counter(); import tilesearch.builder.warm; import sys; print(round(time.perf_counter() - t, 2), "ml_dtypes" in sys.modules)'
meas='import time, torch; t = time.perf_counter(); from tilesearch.runner import measure; measure.warm_up(); import sys; print(round(time.perf_counter() - t, 2), "ml_dtypes" in sys.modules)'
(cd $BEFORE && $PY -c "$fork" > /dev/null)  # the header's record made once
for i in 1 2 3 4 5; do
  for tree in before after; do
    dir=$PWD; [ $tree = before ] && dir=$BEFORE
    echo "$tree fork_server $(cd $dir && PYTHONPATH=$dir $PY -c "$fork" 2>/dev/null | tail -1)"
    echo "$tree measuring_worker $(cd $dir && PYTHONPATH=$dir $PY -c "$meas" 2>/dev/null | tail -1)"
  done
done | tee $D/runs.txt
$PY - $D/runs.txt <<'PY' | tee $D/summary.txt
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for what in ("fork_server", "measuring_worker"):
    for tree in ("before", "after"):
        s = [float(r[2]) for r in rows if r[0] == tree and r[1] == what]
        loaded = {r[3] for r in rows if r[0] == tree and r[1] == what}
        print(f"{what:17s} {tree:6s} median {statistics.median(s):.2f} s  range {min(s):.2f}-{max(s):.2f}  ml_dtypes imported: {sorted(loaded)}")
PY
