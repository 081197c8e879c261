"""The shared core every solver stands on: the per-solve run loop (:mod:`.run`), BLAS thread
limits (:mod:`.threads`) and small numeric checks shared across solvers.

Nothing here imports Pyomo, CVXPY, a front-end or a solver.
"""
