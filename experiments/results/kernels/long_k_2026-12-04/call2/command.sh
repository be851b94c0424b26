# session 32 call 2 (2026-12-04), working tree at 17d7ed0 (bundle carried as .bundle)
# call 2 (2026-12-04, session 32): the long-K cluster probe again, timed by the runner's rounds
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
timeout 540 python3 scripts/cluster_probe.py out=$OUT set=long_k rounds=100 > $OUT/probe.log 2>&1
echo "cluster_probe rc=$? after $(( $(date +%s) - start )) s"
grep -v "TileLang\|Warning" $OUT/probe.log | tail -50
