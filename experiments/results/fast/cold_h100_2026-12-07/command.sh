# Run as `bash experiments/results/fast/cold_h100_2026-12-07/command.sh` on the GPU host, 2026-12-07, tree aefbba8:
# what an empty TileLang cache costs README's main command. Three runs, each on a fresh storage: two with an empty
# TileLang cache (no NVRTC header record: what a machine has before scripts/setup.sh records it), the third keeping the
# header record. Meant for a freshly started machine; the call found the one held since the suite's call
# (model_shapes/suite_single_h100_2026-12-07) still warm, so the first run is not a fresh machine's. Single runs.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=aefbba8
CACHE=fresh timeout 150 bash scripts/time_main_command.sh first=. empty=. kept=.,HEADER=kept > $OUT/main.txt 2>&1
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt) && rm -f $OUT/tune_main_*.txt
grep -v "^measured now" $OUT/main.txt | cut -c1-250
