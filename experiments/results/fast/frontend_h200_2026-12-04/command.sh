# 2026-12-04: README's main command, alternating the tree before builder.frontend (.before =
# 845b8f3, unpacked with `git archive 845b8f3 tilesearch search_spaces plugins scripts pyproject.toml`)
# and after it (. = the working tree at afe15fc), each run on a fresh storage and an empty
# TileLang cache holding NVRTC's header record (the first, cold, run makes it). Then each run's
# measuring-worker load and final re-time phases from its verbose breakdown.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept > $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
for f in $OUT/tune_main_*.txt; do
  echo "$(basename $f): $(grep -E '^(worker: load|worker: check|final re-time|final: load and check|measure|wait for build|wait for measure) ' $f | tr -s ' ' | tr '\n' ';')" >> $OUT/summary.txt
done
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt) && rm -f $OUT/tune_main_*.txt
cat $OUT/summary.txt
