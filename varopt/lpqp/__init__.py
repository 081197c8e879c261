r"""The one HiGHS layer of varopt: LP and convex QP (sub)problems.

Every LP/QP subproblem in varopt goes through this package; nothing else imports
``highspy``. The dual sign convention below is the only one in varopt; every module of the
package refers to it.

Layout
------
``model`` (:class:`HighsModel`: build once, modify, warm re-solve), ``lp_path`` (LP retries,
IPM fallback, phase 1 for ``kUnboundedOrInfeasible``), ``qp_ladder`` (QP verification, retry
ladder, recession check), ``polish`` (KKT polish), ``clarabel`` (Clarabel fallback),
``certificate`` (:func:`kkt_residual`, the independent check), ``checks`` (input validation),
``psd`` (PSD check of ``Q``), ``settings`` (HiGHS options, retry ladder, acceptance threshold),
``process`` (lazy ``highspy`` import, stdout guard), ``result`` (:class:`LPResult`),
``errors``, ``solve`` (one-shot :func:`solve_lp`, :func:`solve_qp`), ``project`` (nearest point
of a polyhedron in the l2 or l1 norm: the start-point repair of the solvers).
``varopt.highs`` re-exports the public names (the import path of earlier versions).

Problem form
------------
.. math::

    \min_x\ \tfrac12 x^\top Q x + c^\top x + \text{const}
    \quad\text{s.t.}\quad r^{lo} \le A x \le r^{hi},\qquad l \le x \le u,

with ``Q`` symmetric positive semidefinite (given FULL and symmetric, dense or scipy
sparse; the layer hands HiGHS its lower triangle, and HiGHS's own objective is
``c^T x + 1/2 x^T Q x`` so no factor is changed), ``A`` dense or scipy sparse (m x n),
and ``-inf``/``+inf`` allowed in every bound. There is no sense flag: to maximise
``g(x)`` minimise ``-g(x)`` and negate the objective and the duals yourself.

Dual sign convention (the only one used in varopt)
--------------------------------------------------
Lagrangian :math:`L(x, y, z) = f(x) - y^\top A x - z^\top x`, so at an optimum

.. math::  Q x + c - A^\top y - z = 0,

``y_i >= 0`` when row ``i`` sits at its lower bound, ``y_i <= 0`` when it sits at its
upper bound, ``y_i = 0`` when it is inactive (either sign for an equality row); the
same for the reduced costs ``z_j`` and the column bounds. Equivalently ``y_i`` is the
derivative of the optimal value with respect to the active bound of row ``i``
(raising an active lower bound by ``t`` raises the optimal value by ``y_i t``).
HiGHS's native convention for a minimisation (checked empirically with highspy 1.15,
and re-checked by ``tests/test_highs.py::test_native_sign_convention``) is exactly this
one, so the layer does not transform the duals.

Worked example: ``min x s.t. x >= 2`` (as a row) gives ``x = 2``, ``y = 1``
(``c - y = 0``); as a column bound instead, ``z = 1``. ``min -x s.t. x <= 3`` gives
``y = -1``.

Statuses
--------
``LPResult.status`` is one of ``"optimal"``, ``"infeasible"``, ``"unbounded"``,
``"error"`` (time/iteration limits, numerical trouble; ``message`` and
``model_status`` say which). HiGHS's ``kUnboundedOrInfeasible`` (presolve found dual
infeasibility without deciding primal feasibility) is resolved by a phase-1 solve (the
same constraints, zero objective, presolve off, on a separate HiGHS instance so the warm
basis of the model is untouched): feasible -> ``"unbounded"``, infeasible ->
``"infeasible"``. ``solve()`` never raises for these; ``LPResult.raise_for_status()``
raises :class:`InfeasibleError` / :class:`UnboundedError` / :class:`HighsError`.

Warm starts
-----------
:class:`HighsModel` builds the HiGHS model once; ``set_cost``, ``set_col_bounds``,
``set_row_bounds``, ``add_rows``, ``delete_rows``, ``set_coefficient``, ``add_cols``
modify it in place and the next ``solve()`` starts from the previous simplex basis
(HiGHS skips presolve when it holds a valid basis). Row indices are positional, as in
HiGHS: ``delete_rows`` shifts the rows after the deleted ones down and returns the map
``old index -> new index`` (``-1`` for deleted rows). QPs are hot-started
(``qp_allow_hot_start``, with the solution and basis of the last verified solve of the same
size); retries after a failed attempt start cold.

LP reliability
--------------
HiGHS 1.15's presolve wrongly calls some tiny degenerate LPs "infeasible" (found by the
random status tests). Every "infeasible"/"unbounded" LP answer reached with presolve (cold
solves; warm solves skip presolve and the simplex answer comes with a ray) is therefore
confirmed by a phase-1 LP (presolve off); on a contradiction the model is re-solved without
presolve. Set ``model.verify_status = False`` to skip this (one extra LP solve per such answer).

QP accuracy and reliability
---------------------------
HiGHS's active-set QP solver (the only QP solver in HiGHS 1.15) (i) adds
``qp_regularization_value * I`` (1e-7) to ``Q``, perturbing ``x`` and the duals at the 1e-7
level, (ii) cycles on some small degenerate QPs, (iii) sometimes calls a singular PSD ``Q``
"non-convex", (iv) sometimes returns "optimal" for a point that is not (KKT residual
O(1)) or with NaN in ``x``, and (v) calls about half of some unbounded QPs (rank-1 ``Q``,
free columns) "optimal" and some bounded ones "unbounded"; (ii)-(iv) hit ~5-10% of random
2..12-variable box-constrained QPs. The layer therefore:

1. *polishes* every QP answer: with the active set ``W`` read off the solution (bounds hit
   within a tolerance with a dual of the right sign) it solves the equality-constrained KKT
   system ``[Q_FF -A_WF'; A_WF 0][x_F; y_W] = [-c_F - Q_FC l_C; b_W - A_WC l_C]`` (columns
   ``C`` fixed at their active bound; least squares when singular) and keeps the polished
   point if its :func:`kkt_residual` is smaller;
2. accepts an "optimal" answer only if ``kkt_residual <= 1e-8 * scale`` (scale = 1 + the
   largest term of the stationarity equation), otherwise retries HiGHS with presolve off
   and regularisation 1e-5, then 1e-3, and finally solves the QP with Clarabel (interior
   point, tolerances 1e-10) followed by the same polish. ``res.info`` records the
   ``attempts``, the ``kkt`` residual and whether the point was ``polished``; an answer that
   stays above the threshold is flagged ``info["unverified"]`` (status "error" if 1000x above).
   A cold QP with at least 1,500 columns + rows starts with Clarabel instead (HiGHS's active set needs an
   iteration per active bound or row, each dearer with the size: projecting a point onto 1,000 rows took it
   7.7 s, then its iteration limit, against 0.09 s for Clarabel), HiGHS's attempts after it, and so does a cold QP
   whose equality rows hold at least 30,000 nonzeros (500 dense equalities in 900 columns: HiGHS 12 s, Clarabel
   0.33 s; ``qp_ladder.cold_prefers_clarabel``, also read by majorize's step QPs); a warm-started QP
   keeps HiGHS first. HiGHS stopping at the iteration limit the layer sets (cycling) skips its other attempts;
3. confirms "infeasible" by a phase-1 LP and "unbounded" by the LP
   ``min c'd s.t. Q d = 0, d in the recession cone, -1 <= d <= 1`` having a negative value
   (for convex Q the QP is unbounded iff it is feasible and such a d exists); when no
   attempt verifies optimality, that LP is also run and a direction found gives "unbounded".

Families of QPs with fixed constraints (majorize's step QPs) have two fast paths that use the same certificate
(``kkt_residual`` at most ``1e-8 * scale``) and otherwise defer to :class:`HighsModel`: a warm-started primal
active set (:mod:`.active_set`, dense ``Q`` or a factored operator) and, for many rows in few columns with a
positive definite ``Q``, the dual active set of Goldfarb & Idnani (1983) (:mod:`.dual_active_set`: no feasible
start needed, one factorization of ``Q``, the rows added by violation).

With ``Q`` PSD a point with zero KKT residual is a global minimiser, so the KKT residual
is the certificate. ``Q`` is checked for PSD when the model is built (n <= 800, or any n
when diagonally dominant) and when HiGHS calls it non-convex.

HiGHS 1.15 printf's some postsolve debug lines to stdout even with ``output_flag`` off, so
file descriptor 1 points at /dev/null while HiGHS runs (``SILENCE_NATIVE_STDOUT``).

Single-threaded BLAS is used (threadpoolctl, when installed) for the dense PSD check and
the small dense least-squares solves of the polish: a multi-threaded OpenBLAS on the loaded
test machine made a 200 x 200 Cholesky take 0.2 s instead of 0.2 ms.
"""
from .errors import STATUSES, HighsError, InfeasibleError, UnboundedError
from .result import LPResult
from .model import HighsModel
from .solve import solve_lp, solve_qp
from .certificate import kkt_residual
from .project import project

__all__ = ["HighsModel", "LPResult", "solve_lp", "solve_qp", "kkt_residual", "project",
           "InfeasibleError", "UnboundedError", "HighsError", "STATUSES"]

