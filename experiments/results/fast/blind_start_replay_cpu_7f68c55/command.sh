# 2026-12-05, this CPU machine (2 cores): the pipeline schedule's quality in replay, without a GPU.
# before: the tree at b5da85b (git worktree), after: 7f68c55 (the blind start-up rounds launched at once);
# extra=8,12: the after tree with 8 or 12 more trials in flight (a deeper pipeline, not adopted).
python scripts/schedule_quality.py seeds=100 experiments/data/gemm_*.jsonl.gz > before_b5da85b.txt   # in a worktree of b5da85b, this script copied in
python scripts/schedule_quality.py extra=0,8,12 seeds=100 experiments/data/gemm_*.jsonl.gz > after_7f68c55.txt
