#!/usr/bin/env bash
# call 4 of 2026-12-03 (issue 13): call 3's model-shape searches again (7848428), a second run for the spread
# between searches. Run from the repo root.
set -u
source scripts/gpu-host.sh
timeout 200 python experiments/model_shapes.py out=$OUT/ms_after2 budget_s=120 \
  shapes=odd.short_k.bfloat16,odd.short_k_wide.float16 > $OUT/ms_after2_stdout.log 2>&1
echo "model_shapes rc=$?"
cd $OUT && tar -czf raw.tgz ms_after2 && rm -rf ms_after2
grep -v Warning $OUT/ms_after2_stdout.log | grep -A9 '^gemm'
