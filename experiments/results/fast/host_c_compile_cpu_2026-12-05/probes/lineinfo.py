import runpy, sys, time, pickle, io, contextlib
from tilesearch.builder import compiler
own = compiler.nvrtc_cubin
seen=[]
def spy(code, options, counted=True):
    seen.append((code, list(options))); return own(code, options, counted)
compiler.nvrtc_cubin = spy
sys.argv=["x"]
with contextlib.redirect_stdout(io.StringIO()):
    runpy.run_path("/tmp/prof/compile_prof.py", run_name="__main__")
compiler.nvrtc_cubin = own
import subprocess, os
res={}
for variant in ("with", "without", "with", "without"):
    ts=[]
    for i,(code,opts) in enumerate(seen):
        o = opts if variant=="with" else [x for x in opts if x!="-lineinfo"]
        t=time.perf_counter(); cub=own(code,o,False); ts.append(time.perf_counter()-t)
        open(f"/tmp/prof/k{i}_{variant}.cubin","wb").write(cub)
    print(variant, [round(x,3) for x in ts])
from tilesearch.builder.batch import code_sections
for i in range(len(seen)):
    a=code_sections(open(f"/tmp/prof/k{i}_with.cubin","rb").read()); b=code_sections(open(f"/tmp/prof/k{i}_without.cubin","rb").read())
    print(i, "code same" if a==b else "CODE DIFFERS", sorted(a)[:4])
