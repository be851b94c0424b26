# commit fc1a6ec, on the GPU host, in the repository root
source scripts/gpu-host.sh
bash scripts/time_main_command.sh nvrtc=.,TILESEARCH_COMPILER=nvrtc nvcc=.
python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 progress=false storage=sqlite:////tmp/main_nvcc_2.db   # the no-op rerun, timed with date
