# call 3 (2026-12-03), repository root on the GPU host; .after = 86eff25 (with tests/ and examples/), .before = 7955456,
# unpacked with git archive as in call 2. The GPU tests call 1's limit cut (test_nn_linear, test_experiment,
# test_range_tuner), run from .after; then README's main command again, kept header, alternating, as in call 2.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
(cd .after && PYTHONPATH=$PWD:$PYTHONPATH timeout -s INT 300 python3 -m pytest -q -m gpu tests/test_nn_linear.py tests/test_experiment.py tests/test_range_tuner.py -p no:cacheprovider -rA --durations=10) > $OUT/pytest_gpu.log 2>&1
echo "pytest gpu rc=$?" > $OUT/summary.txt
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)" $OUT/pytest_gpu.log | cut -c1-150 >> $OUT/summary.txt
tail -2 $OUT/pytest_gpu.log >> $OUT/summary.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=.after after=.after,HEADER=kept before=.before,HEADER=kept after=.after,HEADER=kept \
  before=.before,HEADER=kept >> $OUT/summary.txt 2>&1
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt) && rm $OUT/tune_main_*.txt
cat $OUT/summary.txt
