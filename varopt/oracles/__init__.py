"""Every source of sampled (or exact) gradients, values and curvature estimates, behind one protocol.

Nothing here imports a solver, Pyomo or CVXPY.
"""
