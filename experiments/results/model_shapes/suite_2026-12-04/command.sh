# call 2 (2026-12-04): the model-shape suite's six default shapes as a whole with today's space
# (short-K clusters since 7848428), as b4314f0's run of 2026-11-29; then README's main command
# (a cold run to make NVRTC's header record, then runs that keep it) while device time lasts.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
git log -1 --format=%H > $OUT/commit.txt
timeout 450 python3 experiments/model_shapes.py out=$OUT/ms budget_s=380 > $OUT/ms_stdout.log 2>&1
echo "model_shapes rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
left=$(( 575 - ($(date +%s) - start) ))
if [ $left -gt 60 ]; then
  CACHE=fresh timeout $left bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept kept=.,HEADER=kept >> $OUT/summary.txt 2>&1
fi
tar -C $OUT -czf $OUT/raw.tgz ms ms_stdout.log $(cd $OUT && ls tune_main_*.txt 2>/dev/null) 2>/dev/null
rm -f $OUT/tune_main_*.txt
tail -25 $OUT/ms/model_shapes.txt 2>/dev/null || tail -20 $OUT/ms_stdout.log
cat $OUT/summary.txt
