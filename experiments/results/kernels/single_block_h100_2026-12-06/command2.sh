# Run as `bash experiments/results/kernels/single_block_h100_2026-12-06/command2.sh` on the GPU host (H100), 2026-12-06,
# second call, tree after ff9444a with scripts/cluster_probe.py's set=single_parts: each difference of the
# single-block pipeline from the template undone in its CUDA, timed beside the template; then the model-shape
# suite's six default shapes on the H100 while the call's time lasts.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
timeout 220 python3 scripts/cluster_probe.py out=$OUT/probe set=single_parts rounds=100 > $OUT/probe2.log 2>&1
echo "cluster_probe rc=$? after $(el) s" >> $OUT/summary.txt
left=$(( 585 - $(el) ))
timeout $left python3 experiments/model_shapes.py out=$OUT/ms budget_s=$(( left - 75 )) > $OUT/ms_stdout.log 2>&1
echo "model_shapes rc=$? after $(el) s" >> $OUT/summary.txt
cp $OUT/ms/model_shapes.txt $OUT/model_shapes.txt 2>/dev/null
tar -C $OUT -czf $OUT/raw2.tgz probe ms ms_stdout.log 2>/dev/null
rm -rf $OUT/probe $OUT/ms $OUT/ms_stdout.log
echo "done after $(el) s" >> $OUT/summary.txt
grep -v "^$" $OUT/probe2.log | tail -30
tail -20 $OUT/model_shapes.txt 2>/dev/null
cat $OUT/summary.txt
