# Run as `bash experiments/results/fast/main_2026-12-07/command.sh` on the GPU host, 2026-12-07, tree 54ac6bd (the compile pool's process started before the storage opens).
# 1. README's main command four times (fast-tuning issue), each on a fresh storage and an empty cache folder (the
#    later three keeping NVRTC's header record), each followed by a no-op rerun of itself (RERUN=1).
# 2. The GPU tests of the cluster and single-block cases against float64 (the 256-row chunked case is new).
# 3. The kernels issue's ablation of the schedule knob (crossed with cluster) on the short-K square's recorded
#    choice, from the H100 model-shape run in kernels/single_block_h100_2026-12-06/raw2.tgz.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=54ac6bd
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
CACHE=fresh RERUN=1 timeout 240 bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept \
  kept=.,HEADER=kept > $OUT/main.txt 2>&1
echo "main command rc=$? after $(el) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_main_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_main_*.txt
timeout $(( ${LIMIT:-450} > 330 ? 120 : 60 )) python3 -m pytest -q -m gpu tests/test_gemm_cluster.py -k float64 -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$? after $(el) s: $(tail -1 $OUT/gpu_tests.log)" >> $OUT/summary.txt
mkdir -p /tmp/ms && tar -C /tmp/ms -xzf experiments/results/kernels/single_block_h100_2026-12-06/raw2.tgz ms/model_shapes.json
left=$(( ${LIMIT:-450} - $(el) ))  # LIMIT: the seconds the call may take, less a margin
if [ $left -gt 100 ]; then
  timeout $left python3 scripts/knob_ablation.py out=$OUT/schedule knob=schedule also=cluster \
    from=/tmp/ms/ms/model_shapes.json only='k=256,' budget_s=$(( left - 40 )) run_timeout=30 > $OUT/ablation_schedule.log 2>&1
  echo "schedule ablation rc=$? after $(el) s" >> $OUT/summary.txt
fi
cat $OUT/main.txt; tail -14 $OUT/ablation_schedule.log; cat $OUT/summary.txt
