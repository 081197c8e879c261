"""Matrix-free reference metric of option ``bound_reuse`` (``reuse_metric='line'``, chosen by ``'auto'`` by predicted cost).

On a compiled program the trials of :mod:`.reuse` use a *matrix* metric ``P``: the objective's Hessian at the start,
then the bound ``H + Sigma + rho I`` of the last Algorithm 2 step (Jebara & Choromanska 2012), dense or in the
Kronecker form of class-template features (:mod:`.reuse_metric`). Forming it costs about ``2 G (c-1) n^2`` flops
(dense) or ``2 G d'^2`` plus a ``d' x d'`` generalized eigenproblem (Kronecker), against ``~4 nnz(F)`` for one
value and gradient. On a large, well-conditioned program (dense features, ``G = 2000`` samples, ``n = 401``) that
is a hundred gradients, while L-BFGS needs about twenty-five: the matrix is never paid back.

The line metric replaces it by one number along the current gradient ``u``::

    L = u^T (H + C + rho I) u / u^T u,      u^T C u = sum_g || T_g F_g u ||^2       (the bound, C = Sigma)
                                            u^T C u = sum_g Var_{p_g}(F_g u) c_g     (the Hessian, the first one)

(one product ``F u`` per evaluation of ``L``; ``T_g`` the ``(c-1) x c`` row-space factor of Algorithm 1,
:meth:`.groups.PaddedGroups.factors`, ``G c^2`` flops). The trials are then L-BFGS steps with L-BFGS's own initial
matrix ``(s^T y / y^T y) I`` (:class:`.reuse.ScaledCurvature`), accepted when the exact objective decreases by
``ETA/2 u^T u / L`` (the test ``(*)`` of :mod:`.reuse` with ``P = L I``); a rejected trial is followed by
Algorithm 2's step restricted to the line ``x + a u`` (:func:`line_bound_step`): Theorem 1 on that line gives
``f(x - u / L) <= f(x) - 1/2 u^T u / L`` with the bound's ``L``, a monotone step that needs no matrix either. ``L`` is
at most ``lambda_max(H + Sigma + rho I)`` (the Hessian's at most the bound's, Theorem 1), bounded on the level set,
so every iteration decreases ``f`` by at least ``ETA/2 ||u||^2 / lambda_max`` and ``u_k -> 0`` as in Algorithm 2.
Nothing of size ``n^2`` (dense ``Sigma``, Kronecker factors, Cholesky or eigen-decompositions) is built on this path.

With linear constraints and bounds the trials live on the face of the active bounds (:func:`.reuse.free_set`; the
line metric restricted there is ``L I`` again), capped at the largest feasible factor, and a rejected (or blocked)
trial is followed by Algorithm 2's own constrained step (the step QP of :mod:`.step_qp`, e.g. on the row-space
Woodbury operator), after which ``L`` is the bound's curvature along ``u`` at that iterate. Every iteration is
then an accepted trial (a decrease of at least ``ETA/2 u_F^T u_F / L``) or Algorithm 2's step, as in the
constrained trials on the matrix metric (docs/majorize.md section 2).

The rule of ``reuse_metric='auto'`` (docs/majorize.md section 2, :func:`line_pays`): the line metric when the
matrix metric is predicted to cost more than ``LINE_THRESHOLD`` line iterations (:func:`metric_gradients`), or,
without a matrix metric (row-space Woodbury, CG without class templates: every iteration a bound step), always
(``NO_METRIC_THRESHOLD = 0``). No switch to the matrix later: a line-metric run costs about what L-BFGS does (the
same products per iteration), while a matrix formed late is paid in full (measured, docs/majorize.md section 2).
"""
from __future__ import annotations

import math

import numpy as np

from .structured import (CG_GUESS, DENSE_MAX_ENTRIES, DENSE_OVERHEAD, SLOW_FLOP, _lowrank_cost, choose_step_solver,
                         kron_preconditioner_fits, predicted_costs)

#: the matrix metric is replaced by the line metric when predicted to cost more than this many line iterations
#: (calibrated on the seven logistic benchmark sets and synthetic dense shapes, docs/majorize.md section 6.0: the
#: seven sets predict 0.3-0.8 and gain from the matrix; every synthetic shape from 2 up gains from the line metric)
LINE_THRESHOLD = 1.5
#: without a matrix metric (every iteration a bound step), the line metric when a bound step costs more than this
#: many line iterations: 0, i.e. always (measured: Algorithm 2 with extrapolation on the row-space Woodbury step was
#: slower than the line metric on every such program, SRBCT 1.3x, colon cancer 24x at 1e-8; docs/majorize.md 6.0)
NO_METRIC_THRESHOLD = 0.0
#: flop-equivalent of the Python overhead of one line-metric iteration (trial, test, pairs, record: ~110 us)
ITER_OVERHEAD = 2.5e6
#: cost of a flop of the memory-bound feature products relative to a GEMM flop (measured: 0.2 ns against 0.043 ns)
GEMV_FLOP = 4.5
#: flops of the generalized symmetric eigenproblem of the Kronecker preconditioner per d'^3 (LAPACK sygvd)
EIGH_FLOPS = 9.0


def _structure_applies(model, opts) -> bool:
    return model.groups is not None and model.pos is not None and model.convex and opts.bound != "lowrank"


def line_applies(model, opts) -> bool:
    """The line metric needs the padded groups (``F u`` and the factors ``T``), a convex program, the full bound,
    and no flat coordinate (:func:`flat_coordinates`). With constraints the trials move on the face of the active
    bounds (``(L I)_FF = L I``) and a rejected trial is followed by Algorithm 2's constrained step (the step QP)
    instead of the step on the gradient's line, which could leave ``Lambda``."""
    return _structure_applies(model, opts) and not (opts.ridge == 0 and flat_coordinates(model).any())


def flat_coordinates(model) -> np.ndarray:
    """Coordinates ``j`` along which the bound has no curvature anywhere: ``H_jj = 0`` and column ``j`` of the
    features constant over the configurations of every partition function (``Sigma_g e_j = 0``: Algorithm 1's
    rows ``l_i = F_g^T (e_i - P_i)`` are then orthogonal to ``e_j``). ``f`` is affine along such a ``j``; the
    matrix steps detect a nonzero slope there (status ``unbounded``, section 2 of docs/majorize.md), the line
    metric would not (its curvature along ``u`` is positive whenever ``u`` has any other component), so such
    programs keep the matrix steps. Only the columns with ``H_jj = 0`` (typically the intercepts) are examined."""
    got = getattr(model, "_flat_coordinates", None)
    if got is not None:
        return got
    grp = model.groups
    hd = model.Hd if model.Hd is not None else model.H.diagonal()
    flat = np.zeros(model.n, dtype=bool)
    J = np.flatnonzero(hd <= 0)
    if J.size:
        Fj = grp.Apad[:, J].toarray().reshape(grp.G, grp.c, J.size)  # padded rows are 0
        live = grp.live[:, :, None]
        big, small = np.where(live, Fj, -np.inf).max(axis=1), np.where(live, Fj, np.inf).min(axis=1)
        flat[J] = np.all(big == small, axis=0)
    model._flat_coordinates = flat
    return flat


def gradient_flops(model) -> float:
    """Predicted cost of one line-metric iteration (flop-equivalents of :func:`.structured.predicted_costs`, one unit
    a flop of a large GEMM): ``F theta`` and ``F^T W`` (``2 nnz(F)`` memory-bound flops each), the softmax
    (``~10 G c``) and the per-iteration overhead."""
    grp = model.groups
    return GEMV_FLOP * (4.0 * grp.Apad.nnz + 10.0 * grp.G * grp.c) + ITER_OVERHEAD


def matrix_metric_path(model, opts):
    """The step solver's path when it comes with a matrix metric for the trials (``'dense'``, or ``'cg'`` with the
    Kronecker approximation), else None (row-space Woodbury, CG without class templates, low rank: every
    iteration is then a bound step). Class templates are detected first (the first evaluation detects them
    anyway), so the path is the one the run takes."""
    model.groups.template
    path = choose_step_solver(model, opts)
    if path == "dense" or (path == "cg" and kron_preconditioner_fits(model.groups)):
        return path
    return None


def metric_flops(model, opts) -> float:
    """Predicted cost of the matrix metric the trials would use: the dense Hessian (or bound) and its Cholesky
    (dense step solver); the Kronecker constants ``C = X^T X`` and the generalized eigenproblem of ``C`` against
    ``B + C`` (Kronecker-preconditioned CG); without a matrix metric, one bound step (what every iteration
    then costs)."""
    grp = model.groups
    path = matrix_metric_path(model, opts) or choose_step_solver(model, opts)
    if path == "cg" and kron_preconditioner_fits(grp):
        G, dp = grp.G, grp.template[2].shape[1]
        return 2.0 * G * dp * dp + SLOW_FLOP * EIGH_FLOPS * dp ** 3
    return predicted_costs(model, opts)[path]


def metric_gradients(model, opts) -> float:
    """The matrix metric's (or, without one, a bound step's) predicted cost in line-metric iterations."""
    return metric_flops(model, opts) / gradient_flops(model)


def _lower_flops(model, opts) -> float:
    """A lower bound of :func:`metric_flops` over every step solver, known without detecting class templates (which
    costs tens of gradients on large dense features): forming a matrix costs at least ``2 G m^2`` and factoring it
    ``SLOW m^3 / 3`` (``m`` the mean nonzeros of a nonempty feature row: dense ``2 G (c-1) n^2 >= 2 G m^2``, class
    templates ``2 G d'^2``, ``m <= d' <= n``); the row-space Woodbury step and the low-rank bound as predicted; CG without a Kronecker
    preconditioner costs ``CG_GUESS`` matrix-free products (about ``CG_GUESS`` gradients)."""
    grp = model.groups
    rn = np.diff(grp.Apad.indptr)
    rn = rn[rn > 0]
    m = float(rn.mean()) if rn.size else 0.0
    low = 2.0 * grp.G * m * m + SLOW_FLOP * m ** 3 / 3.0  # and a factorization of order >= m
    G, c, n = grp.G, grp.c, model.n
    rows = G * (c - 1)
    if opts.bound in ("full", "auto") and rows * rows <= DENSE_MAX_ENTRIES:
        low = min(low, SLOW_FLOP * (2.0 * G * G * c * c * (c - 1) + rows ** 3 / 3.0 + 4.0 * G * c * n))
    if opts.bound == "auto":
        low = min(low, _lowrank_cost(G, c, n, opts.rank))
    return min(low, CG_GUESS * SLOW_FLOP * 4.0 * grp.Apad.nnz)


def _upper_flops(model) -> float:
    """An upper bound of the dense metric (generic ``Sigma``, Cholesky, overhead): ``2 G (c-1) n^2 + SLOW n^3/3``."""
    grp, n = model.groups, model.n
    return 2.0 * grp.G * (grp.c - 1) * n * n + SLOW_FLOP * n ** 3 / 3.0 + DENSE_OVERHEAD


def line_pays(model, opts) -> bool:
    """The rule of ``reuse_metric='auto'`` on a compiled program (an explicit ``step_solver`` keeps its metric):
    with a matrix metric, the line metric when the matrix costs more than ``LINE_THRESHOLD`` iterations; without
    one, when a bound step costs more than ``NO_METRIC_THRESHOLD`` iterations. With constraints: only without a
    matrix metric (the row-space Woodbury step; the dense step QP's curvature is the trials' metric) and without
    equality rows (every trial would be blocked)."""
    if opts.step_solver != "auto" or not _structure_applies(model, opts):
        return False
    if model.constrained:
        # the step QP forms the dense curvature anyway when it is the step's path, and the trials then use it (the
        # line metric took 22 iterations for the matrix metric's 9 on constrained digits, 1.4x the time); without
        # it (the row-space Woodbury step) every iteration would be a step QP: the line metric's trials
        # (constrained SRBCT: 76 iterations of which 2 step QPs, against 25 step QPs, 0.7x the time)
        # an equality row blocks every trial (a quasi-Newton step leaves it): step QPs only, as without trials
        pays = choose_step_solver(model, opts) == "woodbury" and not np.any(model.lo == model.hi)
        return pays and not (opts.ridge == 0 and flat_coordinates(model).any())
    grad = gradient_flops(model)
    if _upper_flops(model) <= LINE_THRESHOLD * grad:
        return False  # small programs: even the generic dense metric is cheap (decided without costing the paths)
    if _lower_flops(model, opts) > max(LINE_THRESHOLD, NO_METRIC_THRESHOLD) * grad:
        pays = True  # decided without detecting class templates
    else:
        limit = LINE_THRESHOLD if matrix_metric_path(model, opts) is not None else NO_METRIC_THRESHOLD
        pays = metric_flops(model, opts) > limit * grad
    return pays and not (opts.ridge == 0 and flat_coordinates(model).any())


def line_curvature(model, x, u, S, opts, hessian=False):
    """``L = u^T (H + C + rho I) u / u^T u`` at ``x`` with ``C`` the bound (``hessian=False``) or the objective's
    Hessian; None for ``u = 0``. ``S`` the cache of :meth:`.model.MajorizeModel.evaluate` at ``x``."""
    uu = float(u @ u)
    if not uu > 0:
        return None
    grp = model.groups
    if S is None:
        S = model.evaluate(x)[2]
    V = grp.fmul(u)  # (G, c): F_g u, 0 on padding
    if hessian:
        # c_g Var_{p_g}(F_g u) with W = c_g p_g; centred (no cancellation); padding has W = 0
        W = S[1]
        mean = np.einsum("gc,gc->g", W, V) / grp.coef
        dv = V - mean[:, None]
        q = float(np.einsum("gc,gc->", W * dv, dv))
    else:
        TV = np.matmul(grp.factors(S[0]), V[:, :, None])  # (G, c-1, 1): T_g F_g u
        q = float(np.einsum("gij,gij->", TV, TV))
    Hu = model.Hd * u if model.Hd is not None else model.H @ u
    return (max(q, 0.0) + float(u @ Hu)) / uu + opts.ridge


def line_bound_step(model, x, u, S, opts):
    """Algorithm 2's step restricted to the line ``x + a u``: ``D = -u / L`` with the bound's ``L``, majorizer
    value ``-1/2 u^T u / L``. Returns ``(D, m(D), info, None, L)``; ``L = 0`` (``u`` along a flat direction of
    the bound: ``f`` is affine there with slope ``-||u||^2``) gives ``D = 0`` and ``info["flat"] = ||u||``."""
    model.count_step("line")
    L = line_curvature(model, x, u, S, opts)
    if L is None:
        return np.zeros(model.n), 0.0, {}, None, None
    uu = float(u @ u)
    if not (L > 0 and math.isfinite(L)):
        return np.zeros(model.n), 0.0, {"flat": math.sqrt(uu)}, None, None
    return -u / L, -0.5 * uu / L, {}, None, L
