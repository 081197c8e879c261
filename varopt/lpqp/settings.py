"""HiGHS options varopt sets, the QP retry ladder, the statuses that are user limits, and the
KKT acceptance threshold of an "optimal" QP answer.
"""
from __future__ import annotations





_DEFAULT_OPTIONS = {
    "output_flag": False,
    "log_to_console": False,
    "random_seed": 0,
}

#: a cold QP with at least this many columns + rows goes to Clarabel first (HiGHS's active set after it)
_CLARABEL_FIRST = 1500
#: ... and so does a cold QP whose equality rows hold at least this many nonzeros: HiGHS's active set took 12 s on a
#: projection onto 500 dense equalities in 900 columns (1,400 columns + rows), 0.35 s on 200 in 200 (Clarabel 0.33 s
#: and 0.01 s; benchmarks/lpqp_equality_qps.py)
_CLARABEL_FIRST_EQ_NNZ = 30_000
#: retries of HiGHS's active-set QP solver when it stops without a decision (it can
#: report a singular PSD Hessian as "Non-convex" (model status "Not Set") and it can
#: cycle on small degenerate QPs, ~5% of random 2..12-variable instances in testing)
_QP_RETRIES = ({"qp_regularization_value": 1e-5, "presolve": "off", "qp_allow_hot_start": False},
               {"qp_regularization_value": 1e-3, "presolve": "off", "qp_allow_hot_start": False})
#: model statuses that are a user limit, not a failure (no retry)
_LIMIT_STATUSES = ("Time limit reached", "Iteration limit reached", "Bound on objective reached",
                   "Target for objective reached", "Solution limit reached", "Interrupted by user",
                   "Memory limit reached")

#: an "optimal" QP answer is accepted when kkt_residual <= _KKT_ACCEPT * _kkt_scale
_KKT_ACCEPT = 1e-8
