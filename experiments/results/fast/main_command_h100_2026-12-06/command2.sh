# Run as `bash experiments/results/fast/main_command_h100_2026-12-06/command2.sh` on the GPU host (H100), 2026-12-06,
# the same machine start right after command.sh: README's main command alternating the tree before the batched
# attribute writes (7fb3a88, unpacked in .before) and after (f307030), two pairs, fresh storages and caches keeping
# NVRTC's header record.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
rm -rf /tmp/main_*  # the storages and caches of command.sh, run before on this machine start
CACHE=fresh timeout 215 bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept \
  before=.before,HEADER=kept after=.,HEADER=kept > $OUT/summary2.txt 2>&1
tar -C $OUT -czf $OUT/runs2.tgz $(cd $OUT && ls tune_main_*.txt) && rm -f $OUT/tune_main_*.txt
cat $OUT/summary2.txt
