import time, runpy, sys, collections
import tilelang, tvm
from tvm.ir import transform
orig = transform.Pass.__call__
acc = collections.Counter(); cnt=collections.Counter(); depth=[0]
def call(self, mod):
    depth[0]+=1
    t=time.time(); r = orig(self, mod); dt=time.time()-t
    depth[0]-=1
    if depth[0]==0:
        try: name = self.info.name
        except Exception: name = type(self).__name__
        acc[name]+=dt; cnt[name]+=1
    return r
transform.Pass.__call__ = call
sys.argv=["x"]
import io, contextlib
buf=io.StringIO()
with contextlib.redirect_stdout(buf):
    runpy.run_path("/tmp/prof/compile_prof.py", run_name="__main__")
print([l for l in buf.getvalue().splitlines() if l.startswith("each")])
tot=sum(acc.values()); print("total pass s", round(tot,2))
for k,v in acc.most_common(25): print(f"{v:7.3f} {cnt[k]:3d} {k}")
