# Run as `bash experiments/results/fast/compile_cost_cpu_2026-12-06/command.sh` on the 2-core CPU machine (no GPU).
# 2026-12-06: what makes a GEMM configuration slow to compile (the compile_cost of 4868fe8, reverted in 5b2ac71): 64 random
# configurations of 8192^3 float16 compiled one at a time with NVRTC from an empty cache, then a log-linear fit.
set -eu
D=experiments/results/fast/compile_cost_cpu_2026-12-06
python experiments/compile_time.py out=/tmp/ct configs=64 workers=1 batch=1 seed=3 > /tmp/ct.log 2>&1
cp /tmp/ct/compile_time.json $D/
python $D/fit.py $D/compile_time.json > $D/fit.txt
