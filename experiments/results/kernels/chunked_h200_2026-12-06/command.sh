# Run on the GPU host (an H200 this time), 2026-12-06, tree 67e27bb, right after
# model_shapes/single_vs_default_2026-12-06 on the same machine: the chunked probe of the H100's
# kernels/chunked_h100_2026-12-06, every variant checked against float64 and timed interleaved with torch.matmul.
source scripts/gpu-host.sh > /dev/null 2>&1; timeout 430 python3 scripts/cluster_probe.py set=chunked rounds=60 > $OUT/probe.log 2>&1; echo rc=$?; tail -45 $OUT/probe.log
