# The CPU machine (2 cores), 2026-12-06, at be1d2b9: the tuning loop's schedule simulated with the compile times of
# 7 recorded runs of README's main command on an H100 (launch_order_h100_2026-12-06/trials.jsonl), in launch order
# and with the patience rule; then 100 seeds of a 48-trial TPE search replayed from the 8192^3 dataset with each
# build taking those recorded compile seconds halved (patience 3 s, halved alike, against launch order).
set -euo pipefail
R=experiments/results/fast/patience_cpu_2026-12-06
T=experiments/results/fast/launch_order_h100_2026-12-06/trials.jsonl
.venv/bin/python scripts/schedule_sim.py $T patience=3,2,1 > $R/schedule_sim.txt
.venv/bin/python scripts/schedule_quality.py seeds=100 compile=$T:0.5 patience=inf,3 \
  experiments/data/gemm_8192x8192x8192_float16_nn_h100_80gb_hbm3.jsonl.gz > $R/replay_quality_100_seeds.txt
