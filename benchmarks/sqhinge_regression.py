"""No-regression check of branch sqhinge: gop and majorize on the L2-SVM (free and ``w >= 0``) and the probit
(``cp.log_normcdf``), cold starts. Prints JSON: a digest of the compiled program (objective and every row at 5 random
points, names) and each solve's status, objective, point and iteration count, all to the last digit.

Usage: run once with the main tree and once with the branch on ``PYTHONPATH`` and ``diff`` the outputs::

    PYTHONPATH=/path/to/main python benchmarks/sqhinge_regression.py > main.json
    PYTHONPATH=/path/to/branch python benchmarks/sqhinge_regression.py > branch.json && diff main.json branch.json
"""
import hashlib
import json
import sys

import cvxpy as cp
import numpy as np

from varopt.frontends.cvxpy_compile import compile_cvxpy

rng=np.random.default_rng(0); X=rng.normal(size=(40,3)); y=np.sign(X@[1,-1,0.5]+0.3*rng.normal(size=40))
w=cp.Variable(3)
models={"sqhinge": (cp.sum(cp.square(cp.pos(1-cp.multiply(y, X@w))))+0.5*cp.sum_squares(w), []),
        "sqhinge_nonneg": (cp.sum_squares(cp.pos(1-cp.multiply(y, X@w)))+0.5*cp.sum_squares(w), [w >= 0]),
        "probit": (-cp.sum(cp.log_normcdf(cp.multiply(y, X@w))) + 0.5*cp.sum_squares(w), [])}
out={}
def digest(prog):
    h=hashlib.sha256()
    xs=np.random.default_rng(1).normal(size=(5,prog.n))
    for x in xs:
        h.update(np.round(prog.objective.value(x),12).tobytes())
        for c in prog.constraints:
            h.update(np.round(c.body.value(x),12).tobytes()); h.update(np.array([c.lo,c.hi]).tobytes())
    h.update(str(prog.names).encode())
    return h.hexdigest()[:16], prog.n, len(prog.constraints)
for name,(obj,cons) in models.items():
    p=cp.Problem(cp.Minimize(obj),cons)
    out[name+"/program"]=digest(compile_cvxpy(p)[0])
    for m in ["gop","majorize"]:
        w.value=None
        p.solve(method=m); r=p.varopt_result
        out[f"{name}/{m}"]={"status": r.status, "obj": repr(r.objective), "x": [repr(v) for v in r.x], "it": r.iterations}
json.dump(out, sys.stdout, indent=1)
