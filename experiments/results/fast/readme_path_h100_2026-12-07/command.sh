# Run as `bash experiments/results/fast/readme_path_h100_2026-12-07/command.sh` on a newly started GPU host, 2026-12-07,
# tree 6280b30 (tilesearch as aefbba8): README's main command as README runs it on a fresh machine. After the host's
# set-up (scripts/gpu-host.sh: the bundle in place of pip), the last step of scripts/setup.sh (record NVRTC's header:
# `python3 -m tilesearch.builder.warm`), then the tune in TileLang's default cache folder, first on the machine, and
# a no-op rerun of it. A single run.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
t=$(date +%s.%N); python3 -m tilesearch.builder.warm > $OUT/warm.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s; header recorded in $(python3 -c "import time; print(round(time.time() - $t, 1))") s (rc=$?); $(nvidia-smi --query-gpu=name --format=csv,noheader)" > $OUT/summary.txt
ls ~/.tilelang/cache/nvrtc >> $OUT/summary.txt 2>&1
export TILESEARCH_COMMIT=aefbba8
RERUN=1 timeout 150 bash scripts/time_main_command.sh readme=. > $OUT/main.txt 2>&1
grep -v "^measured now" $OUT/main.txt | cut -c1-250; cat $OUT/summary.txt
grep -E "^first|^pipeline|^final re-time|^wait for build|^measure " $OUT/tune_main_readme_1.txt
