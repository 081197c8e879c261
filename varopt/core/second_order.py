r"""Second-order check of a first-order point, before a local solver says "locally optimal".

A local method (``ipsa``, ``majorize``) stops when the first-order (KKT) conditions hold. On a
nonconvex program that point may be a saddle or a maximum: ``min x*y`` on ``[-1, 1]^2`` has its
KKT point at ``(0, 0)``, where ``d = (1, -1)`` decreases the objective. Before such a solver reports
``converged`` (Pyomo ``locallyOptimal``), :func:`check` tests the second-order necessary condition
on the face of the active constraints:

* active set ``A``: bounds with ``x_j`` within ``tol`` of ``lb_j``/``ub_j`` (those coordinates are
  fixed) and constraints with ``g_c(x)`` within ``tol`` of a side (every equality);
* multipliers from stationarity, ``grad f + J_A^T lam = 0`` on the free coordinates (least
  squares; only nonlinear constraints need them, a linear row adds no curvature);
* ``H_L = hess f + sum_c lam_c hess g_c`` reduced to ``Z = null(J_A)`` over the free coordinates.

If ``Z^T H_L Z`` has an eigenvalue below ``-tol_curv * max(1, |H_L|)``, there is a direction
``d`` with ``J_A d = 0`` (it keeps every active constraint active, and both ``d`` and ``-d`` keep
the others satisfied for small steps) along which the Lagrangian, hence the objective on the
feasible set, decreases quadratically: the point is not a local minimum, and the status becomes
``stationary``. Otherwise the second-order necessary condition holds on the face (weakly active
bounds are kept fixed, so directions that leave the face are not examined: the check can miss a
descent direction there, never invent one).

The smallest eigenvalue is computed densely up to :data:`DENSE_MAX` free coordinates, and by
Lanczos (``scipy.sparse.linalg.eigsh``) on the projected operator ``P H_L P`` beyond that
(``P`` the orthogonal projector onto ``null(J_A)``, applied through a sparse least-squares
factorisation of ``J_A J_A^T``).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla

#: free coordinates up to which the reduced Hessian is formed and diagonalised densely
DENSE_MAX = 600


def _active(program, x, tol):
    scale = np.maximum(1.0, np.abs(x))
    at_bound = (x - program.lb <= tol * scale) | (program.ub - x <= tol * scale)
    rows = []
    for k, c in enumerate(program.constraints):
        g = c.body.value(x)
        s = max(1.0, abs(g))
        if c.lo == c.hi or abs(g - c.lo) <= tol * s or abs(c.hi - g) <= tol * s:
            rows.append(k)
    return at_bound, rows


def check(program, x, tol: float = 1e-6, tol_curv: float = 1e-7) -> dict:
    """Second-order necessary condition on the active face at ``x`` (module docstring).

    Returns ``{'ok': bool, 'min_curvature': float, 'direction': array or None, 'free': int,
    'active_rows': int}``; ``direction`` (length ``program.n``) is a feasible direction of negative
    curvature when ``ok`` is False.
    """
    x = np.asarray(x, dtype=float)
    at_bound, rows = _active(program, x, tol)
    free = np.flatnonzero(~at_bound)
    out = {"ok": True, "min_curvature": None, "direction": None, "free": int(free.size), "active_rows": len(rows)}
    if free.size == 0:
        return out
    H = sp.csr_matrix(program.objective.hessian(x))
    J = None
    if rows:
        J = sp.csr_matrix(program.constraint_jacobian(x)[rows][:, free])
        nonlinear = [i for i, k in enumerate(rows) if not program.constraints[k].body.is_linear]
        if nonlinear:
            grad = program.objective.gradient(x)[free]
            lam = spla.lsqr(J.T, -grad, atol=1e-12, btol=1e-12)[0]
            for i in nonlinear:
                H = H + lam[i] * sp.csr_matrix(program.constraints[rows[i]].body.hessian(x))
    Hf = sp.csr_matrix(H[free][:, free])
    Hf = (Hf + Hf.T) * 0.5
    scale = max(1.0, float(abs(Hf).max()) if Hf.nnz else 0.0)
    if Hf.nnz == 0:
        return {**out, "min_curvature": 0.0}
    if free.size <= DENSE_MAX:
        Hd = Hf.toarray()
        if J is not None and J.nnz:
            Z = la.null_space(J.toarray())
            if Z.shape[1] == 0:
                return {**out, "min_curvature": 0.0}
            w, V = np.linalg.eigh(Z.T @ Hd @ Z)
            d = Z @ V[:, 0]
        else:
            w, V = np.linalg.eigh(Hd)
            d = V[:, 0]
        lam_min = float(w[0])
    else:
        if J is not None and J.nnz:
            JJt = spla.factorized(sp.csc_matrix(J @ J.T + 1e-12 * sp.eye(J.shape[0])))

            def proj(v):
                return v - J.T @ JJt(J @ v)
        else:
            def proj(v):
                return v
        op = spla.LinearOperator(Hf.shape, matvec=lambda v: proj(Hf @ proj(np.ravel(v))), dtype=float)
        # a fixed start vector: ARPACK's own is random and would make the check depend on earlier calls
        v0 = np.random.default_rng(0).standard_normal(Hf.shape[0])
        w, V = spla.eigsh(op, k=1, which="SA", tol=1e-8, maxiter=20 * free.size, v0=v0)
        lam_min, d = float(w[0]), proj(V[:, 0])
    out["min_curvature"] = lam_min
    if lam_min < -tol_curv * scale:
        full = np.zeros(program.n)
        full[free] = d / max(np.linalg.norm(d), 1e-300)
        out.update(ok=False, direction=full)
    return out


def apply(program, result, skip_reason: str | None = None):
    """Downgrade a ``converged`` result of a nonconvex program to ``stationary`` when :func:`check`
    finds negative curvature on the active face; record the check in ``result.info['second_order']``."""
    if result.status != "converged" or result.x is None:
        return result
    if skip_reason is not None:
        result.info["second_order"] = f"not checked: {skip_reason}"
        return result
    if program.is_convex():
        result.info["second_order"] = "not needed: the program is convex"
        return result
    try:
        rep = check(program, result.x)
    except (np.linalg.LinAlgError, spla.ArpackNoConvergence, ValueError) as exc:
        result.info["second_order"] = f"not decided: {exc}"
        return result
    result.info["second_order"] = {k: v for k, v in rep.items() if k != "direction"}
    if not rep["ok"]:
        result.info["descent_direction"] = rep["direction"]
        result.status = "stationary"
        result.message = (f"{result.message}; " if result.message else "") + (
            f"not a local minimum: a feasible direction of negative curvature {rep['min_curvature']:.3g} "
            "on the active face (a saddle point or a maximum)")
    return result
