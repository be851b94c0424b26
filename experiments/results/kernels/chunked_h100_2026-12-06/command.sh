# Run on the GPU host (H100), 2026-12-06, tree d5caedd (whose cluster program is a7aa9a2's), the machine warm from
# fast/patience_h100_2026-12-06: the cluster program's chunked epilogue (64 columns at a time through two staging
# buffers) beside the template at the long-K model shapes, 8192^3 and a short-K square, each variant checked
# against float64 by the probe before timing (scripts/cluster_probe.py set=chunked). The GPU tests of the chunked
# cases were left out to fit the session's device time (pytest -m gpu tests/test_gemm_cluster.py -k chunked).
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
timeout 500 python3 scripts/cluster_probe.py out=$OUT/probe set=chunked rounds=60 > $OUT/probe.log 2>&1
echo rc=$?
grep -v "^  .*status\|^$" $OUT/probe.log | tail -80
