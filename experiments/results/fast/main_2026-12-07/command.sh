# Run as `bash experiments/results/fast/main_2026-12-07/command.sh` on the GPU host, 2026-12-07, tree 54fb858 (TileLang
# imported without ml_dtypes in the fork server and the measuring worker), with 44fda47 unpacked in .before
# (`mkdir .before && git archive 44fda47 tilesearch search_spaces plugins pyproject.toml | tar -x -C .before`).
# 1. The host's own ml_dtypes: `import tilelang` after torch, with ml_dtypes hidden and not, 3 runs each.
# 2. README's main command alternating the tree before and after (fast-tuning issue), each on a fresh storage and an
#    empty cache folder (all but the first keeping NVRTC's header record), each followed by a no-op rerun of itself.
# 3. The GPU tests of the cluster and single-block cases against float64 (the 256-row chunked case is new).
# 4. The kernels issue's ablation of the schedule knob (crossed with cluster) on the short-K square's recorded
#    choice, from the H100 model-shape run in kernels/single_block_h100_2026-12-06/raw2.tgz.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=54fb858
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
python3 -c "import ml_dtypes, numpy; print('ml_dtypes', ml_dtypes.__version__, 'numpy', numpy.__version__)" >> $OUT/summary.txt 2>&1
for i in 1 2 3; do for mode in plain hidden; do
  python3 -c "
import sys, time, torch
if '$mode' == 'hidden': sys.modules['ml_dtypes'] = None
t = time.perf_counter(); import tilelang; print('import tilelang after torch, ml_dtypes $mode:', round(time.perf_counter() - t, 2), 's')" 2>/dev/null | tail -1
done; done >> $OUT/summary.txt
CACHE=fresh RERUN=1 timeout 300 bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept \
  before=.before,HEADER=kept after=.,HEADER=kept > $OUT/main.txt 2>&1
echo "main command rc=$? after $(el) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_main_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_main_*.txt
left=$(( ${LIMIT:-500} - $(el) ))
if [ $left -gt 150 ]; then
  timeout 100 python3 -m pytest -q -m gpu tests/test_gemm_cluster.py -k float64 -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
  echo "gpu tests rc=$? after $(el) s: $(tail -1 $OUT/gpu_tests.log)" >> $OUT/summary.txt
fi
mkdir -p /tmp/ms && tar -C /tmp/ms -xzf experiments/results/kernels/single_block_h100_2026-12-06/raw2.tgz ms/model_shapes.json
left=$(( ${LIMIT:-500} - $(el) ))  # LIMIT: the seconds the call may take, less a margin
if [ $left -gt 100 ]; then
  timeout $left python3 scripts/knob_ablation.py out=$OUT/schedule knob=schedule also=cluster \
    from=/tmp/ms/ms/model_shapes.json only='k=256,' budget_s=$(( left - 40 )) run_timeout=30 > $OUT/ablation_schedule.log 2>&1
  echo "schedule ablation rc=$? after $(el) s" >> $OUT/summary.txt
fi
cat $OUT/main.txt; tail -14 $OUT/ablation_schedule.log 2>/dev/null; cat $OUT/summary.txt
