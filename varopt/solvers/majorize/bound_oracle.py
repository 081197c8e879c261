"""Majorization over a bound oracle: Algorithm 2 of Jebara & Choromanska (2012) for any log-partition part.

**The protocol** (:mod:`varopt.oracles.bound`, stated there once): a *bound oracle* returns
``(log_z, mu, Sigma)`` at ``theta`` with ``log Z(theta + D) <= log z + D^T mu + 1/2 D^T Sigma D``.
Sources: Algorithm 1 (``bound.compute_bound``: ``z``, ``mu`` exact, ``Sigma`` from the enumeration),
the junction tree of Algorithm 3 for chain and tree CRFs (``junction_tree.chain_bound`` /
``tree_bound``), and sums of such bounds. The low-rank bound of Algorithm 4 is not a separate
oracle: option ``bound='lowrank'`` compresses whatever ``Sigma`` the oracle returns into
``V^T S V + D`` (rank ``rank``) before each step.

An oracle object may also have ``curvature_along(theta, V) -> V^T Sigma V`` (``V`` of shape ``(n,)``: a float, or
``(n, m)``), the bound's curvature on a few directions without forming ``Sigma`` (the chain CRF's projected
junction tree); with a positive definite ``H`` and ``bound_reuse``'s scalar metric it gives the line reference of
:mod:`.reuse` (docs/majorize.md section 2), so that a dense ``Sigma`` is formed only for a fallback step.

**The objective.** :func:`minimize` minimises

    f(theta) = constant + linear^T theta + 1/2 theta^T H theta + log Z(theta)

with ``H`` from ``quadratic`` (a scalar ``lam``: ``H = lam I``; a vector: ``diag``; a PSD matrix), by
Algorithm 2: at ``theta~`` with ``u = grad f(theta~)`` the step minimises the majorizer
``m(D) = u^T D + 1/2 D^T (H + Sigma + rho I) D`` (Eq. of step 3, here unconstrained:
``D = -(H + Sigma + rho I)^{-1} u``, the paper's ``theta~ <- theta~ - Sigma^{-1} u`` of section 6), so
``f(theta~ + D) <= f(theta~) + m(D) <= f(theta~)``. It is the same loop, options, limits, history,
stop reasons, monotonicity checks, extrapolation and :class:`~varopt.result.Result` as
``prob.solve(method='majorize')`` (:mod:`.loop`); the compiled-program path differs only in its
model (:class:`.model.MajorizeModel`, whose log-sum-exp groups are the bound oracle, with fast
row-space paths and linear constraints).
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ...core.run import Run
from ...errors import InputDataError, InvalidOptionError, ModelStructureError
from ...oracles.bound import BoundOracle
from .loop import Majorization
from .solver import MajorizeSolver, blas_limit, check_reuse_options
from .step import dense_step, lowrank_sigma, lowrank_step

__all__ = ["minimize", "OracleModel"]


def _quadratic(quadratic, n):
    """``(Hd, Hm)``: the diagonal of ``H`` when it is diagonal (``Hm = None``), else the dense ``H``."""
    if quadratic is None:
        return np.zeros(n), None
    if sp.issparse(quadratic):
        quadratic = quadratic.toarray()
    q = np.asarray(quadratic, dtype=float)
    if not np.all(np.isfinite(q)):
        raise InputDataError("quadratic contains NaN or inf")
    if q.ndim == 0 or q.ndim == 1:
        Hd = np.broadcast_to(q, (n,)).copy() if q.ndim == 0 or q.size == n else None
        if Hd is None:
            raise InputDataError(f"quadratic has {q.size} entries, theta has {n}")
        if np.any(Hd < 0):
            raise ModelStructureError("quadratic has a negative diagonal entry: the objective is not convex")
        return Hd, None
    if q.shape != (n, n):
        raise InputDataError(f"quadratic has shape {q.shape}, expected ({n}, {n})")
    q = 0.5 * (q + q.T)
    ev = np.linalg.eigvalsh(q).min()
    if ev < -1e-10 * max(1.0, np.abs(q).max()):
        raise ModelStructureError(f"quadratic is not positive semidefinite (min eigenvalue {ev:.3g})")
    return None, q


class OracleModel:
    """``f = constant + linear^T theta + 1/2 theta^T H theta + log Z(theta)`` as the model of :mod:`.loop`.

    ``eager_sigma``: ask the oracle for ``Sigma`` with every value (when every evaluated point is
    accepted, i.e. without extrapolation); otherwise ``Sigma`` is asked for at the accepted point only.
    """

    groups = None
    constrained = False
    convex = True

    def __init__(self, oracle, n, quadratic=None, linear=None, constant=0.0, eager_sigma=False):
        self.oracle = BoundOracle(oracle, n)
        self.n = n
        self.Hd, self.Hm = _quadratic(quadratic, n)
        self.c = np.zeros(n) if linear is None else np.asarray(linear, dtype=float).ravel()
        if self.c.size != n or not np.all(np.isfinite(self.c)):
            raise InputDataError(f"linear must be a finite vector of length {n}")
        self.k = float(constant)
        if not np.isfinite(self.k):
            raise InputDataError("constant is not finite")
        self.eager_sigma = eager_sigma
        # optional: V^T Sigma V without forming Sigma (the junction tree's projected recursion); used for the
        # line reference of bound_reuse with reuse_metric='scalar' when H is positive definite
        along = getattr(oracle, "curvature_along", None)
        if callable(along) and not (np.all(self.Hd > 0) if self.Hm is None else np.linalg.eigvalsh(self.Hm).min() > 0):
            along = None  # a singular H: the bound may have flat directions, which the dense reference detects
        self.curvature_along = along if callable(along) else None

    def _call(self, x, want_sigma):
        return self.oracle.bound(x, want_sigma)

    def evaluate(self, x, want_grad=False, scores=None, err=None):
        """``(f(x), grad f(x), (grad, Sigma or None))`` (the gradient comes with the value anyway)."""
        logz, mu, sig = self._call(x, self.eager_sigma)
        Hx = self.Hd * x if self.Hm is None else self.Hm @ x
        f = self.k + float(self.c @ x) + 0.5 * float(x @ Hx) + logz
        g = self.c + Hx + mu
        return f, g, (g, sig)

    def gradient_at(self, x, S):
        return S[0]

    def step(self, x, u, S, opts, qp=None):
        """The unconstrained majorizer step at ``x`` (dense Cholesky, or Algorithm 4 with ``bound='lowrank'``)."""
        sig = S[1] if S[1] is not None else self._call(x, True)[2]
        if opts.bound == "lowrank":
            lam, U = np.linalg.eigh(0.5 * (sig + sig.T))
            R = (U * np.sqrt(np.maximum(lam, 0.0))).T  # Sigma = R^T R (rows of the bound)
            H = sp.diags(self.Hd) if self.Hm is None else sp.csr_matrix(self.Hm)
            return lowrank_step(lowrank_sigma(R, H, opts.ridge, opts.rank, self.n), u) + (None,)
        Q = np.array(sig, dtype=float)  # a fresh array: H is added in place
        if self.Hm is None:
            Q.flat[::self.n + 1] += self.Hd + opts.ridge
        else:
            Q += self.Hm
            Q.flat[::self.n + 1] += opts.ridge
        return dense_step(Q, u) + (None,)

    def sigma_at(self, x):
        """The oracle's bound curvature at ``x`` (option ``bound_reuse``, :mod:`.reuse`)."""
        return self._call(x, True)[2]

    def line_curvature(self, x, u, opts):
        """``u^T (H + Sigma(x) + rho I) u / u^T u`` from the oracle's ``curvature_along`` (None without it, or for
        ``u = 0``); a non-finite or negative ``u^T Sigma u`` is an error of the oracle."""
        uu = float(u @ u)
        if self.curvature_along is None or not uu > 0:
            return None
        q = self.curvature_along(x, u)
        q = float(np.asarray(q, dtype=float).reshape(-1)[0])
        if not np.isfinite(q) or q < -1e-8 * uu * max(1.0, abs(q) / uu):
            raise InputDataError(f"the bound oracle's curvature_along returned u^T Sigma u = {q!r}: Sigma must be "
                                 "positive semidefinite and finite")
        Hu = self.Hd * u if self.Hm is None else self.Hm @ u
        return (max(q, 0.0) + float(u @ Hu)) / uu + opts.ridge

    def bound_matrix(self, sig, c, opts):
        """``H + c Sigma + rho I`` (``c = 1``: the matrix of Algorithm 2's step)."""
        Q = c * sig  # a fresh array: H is added in place
        if self.Hm is None:
            Q.flat[::self.n + 1] += self.Hd + opts.ridge
        else:
            Q += self.Hm
            Q.flat[::self.n + 1] += opts.ridge
        return Q

    def quadratic_form(self, s, opts):
        """``s^T (H + rho I) s``."""
        Hs = self.Hd * s if self.Hm is None else self.Hm @ s
        return float(s @ Hs) + opts.ridge * float(s @ s)

    def final_value(self, x, f, S):
        return f


def minimize(oracle, x0, *, quadratic=None, linear=None, constant=0.0, **options):
    """Minimise ``constant + linear^T theta + 1/2 theta^T H theta + log Z(theta)`` by Algorithm 2 over the bound
    oracle ``oracle`` (protocol in the module docstring), from ``x0``.

    ``options`` are the ``majorize`` solver's (validated by the same :class:`~varopt.options.OptionSet`:
    ``tol``, ``max_iter``, ``time_limit``, ``verbose``, ``callback``, ``extrapolate``, ``bound_reuse``, ``bound``,
    ``rank``, ``ridge``, ``check_bound``, ``blas_threads``; the start is ``x0``). Returns a
    :class:`~varopt.result.Result` with the same statuses (``optimal``, ``iteration_limit``,
    ``time_limit``, ``unbounded``, ``error``, ``interrupted`` after Ctrl-C with the last iterate) and
    history entries (``objective``, ``step``, ``majorizer_decrease``, ``alpha``).
    """
    if "x0" in options:
        raise InvalidOptionError("minimize takes the start as its argument x0, not as an option")
    x = np.array(x0, dtype=float).ravel()
    if not np.all(np.isfinite(x)):
        raise InputDataError("starting point x0 contains NaN or inf")
    opts = MajorizeSolver.options.validate(options)
    if opts.step_solver not in ("auto", "dense"):
        raise InvalidOptionError(f"step_solver={opts.step_solver!r}: a bound oracle returns a dense Sigma, so its "
                                 "steps are dense solves (use 'auto' or 'dense')")
    if opts.bound_reuse == "auto":
        opts.bound_reuse = 0  # bound oracles: Algorithm 2 unless asked (ChainCRF asks)
    if opts.reuse_metric == "line":
        raise InvalidOptionError("reuse_metric='line' is for compiled programs; a bound oracle with curvature_along "
                                 "gets the line reference with reuse_metric='scalar'")
    if opts.reuse_metric == "auto":
        opts.reuse_metric = "bound"
    check_reuse_options(opts)
    # Sigma with every value only when every evaluated point is the next iterate (Algorithm 2 exactly)
    model = OracleModel(oracle, x.size, quadratic, linear, constant,
                        eager_sigma=not opts.extrapolate and not opts.bound_reuse)
    run = Run(MajorizeSolver.name, opts)
    maj = None
    try:
        with blas_limit(x.size, opts):
            maj = Majorization(model, opts, run)
            res = maj.solve(x)
    except KeyboardInterrupt:
        res = run.interrupted()
    res.wall_time = time.perf_counter() - run.t0
    res.options = dict(options)
    res.info = {"bound": opts.bound, "constrained": False, "convex": True}
    if opts.bound_reuse:
        # scaled trials made / accepted / rejected (each rejection is followed by a bound step), bounds computed
        res.info["bound_reuse"] = dict(maj.reuse.stats) if maj is not None else {}
    return res
