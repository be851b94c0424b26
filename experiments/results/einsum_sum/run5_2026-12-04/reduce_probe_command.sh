# calls 6 and 8 (2026-12-04): the reduce kernel probe (call 6 ran it with all=1 shapes before the option existed; call 7 stopped at a 256 KB variant, since skipped)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
python3 scripts/reduce_probe.py rounds=200 all=1 > $OUT/probe.log 2>&1   # call 6: reduce_probe_all.log
python3 scripts/reduce_probe.py rounds=200 > $OUT/probe.log 2>&1         # call 8: reduce_probe_deeper.log
