# call 4 (2026-12-04): Nsight Compute on einsum-sum's best kernel of each algorithm at t=k=8192
# (float32 and bfloat16 S, from call 1's bench), beside a memset of S: what holds the walks below
# the write floor.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
json=experiments/results/einsum_sum/run5_2026-12-04/einsum_sum_bench.json
timeout 500 ncu --nvtx --nvtx-include "prof/" --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section WarpStateStats --csv --page details \
  python3 scripts/ncu_pair.py $json every=true > $OUT/ncu.csv 2> $OUT/ncu_stderr.log
echo "ncu rc=$?"
python3 scripts/ncu_pair.py table $OUT/ncu.csv > $OUT/table.txt 2>&1
tail -5 $OUT/ncu_stderr.log
cat $OUT/table.txt
