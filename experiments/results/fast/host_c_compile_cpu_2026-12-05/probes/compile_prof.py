import os, sys, time, random, cProfile, pstats, tempfile
os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp()
t0=time.time()
import tilelang
from tilesearch import registry
from tilesearch.target import Target
from tilesearch.records import Candidate
from tilesearch.builder import compiler, library, frontend
compiler.install(); library.install(); frontend.install()
print("import", time.time()-t0, compiler.chosen())
op = registry.load("gemm"); target = Target.from_arch("sm_90a")
problem = op.problem(m=8192, n=8192, k=8192, dtype="float16", layout="nn")
space = op.space(problem, target)
rng = random.Random(1)
configs=[]
while len(configs) < 7:
    c = space.sample(rng)
    if c not in configs: configs.append(c)
from tilesearch.op import Problem
t=time.time(); op.build(problem, configs[0], target); print("first", time.time()-t)
pr = cProfile.Profile()
times=[]
for c in configs[1:]:
    t=time.time(); pr.enable(); op.build(problem, c, target); pr.disable(); times.append(time.time()-t)
print("each", [round(x,2) for x in times], "nvrtc spent", compiler._spent)
st = pstats.Stats(pr); st.sort_stats("cumulative").print_stats(45)
