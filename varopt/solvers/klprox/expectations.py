r"""Gaussian expectations of the likelihood families of the KL-proximal solver.

For a term ``l(u)`` of a one-dimensional predictor ``u = a^T w + b`` and ``q(w) = N(m, V)``, the
predictor is ``u ~ N(mt, vt)`` with ``mt = a^T m + b``, ``vt = a^T V a``. The solver needs

    E(mt, vt) = E[l(u)],   dE/dmt = E[l'(u)],   dE/dvt = E[l''(u)] / 2   (Bonnet and Price)

(Khan, Baque, Fleuret & Fua 2015, eq. (11)-(12): their ``alpha = dE/dmt`` and ``gamma = 2 dE/dvt``
in the sign of a negative log-likelihood). Each family returns ``(E, dE/dmt, dE/dvt)`` vectorized.

=============  ===================  ==================================================================
family         ``l(u)``             expectation
=============  ===================  ==================================================================
``exp``        ``exp u``            ``exp(mt + vt/2)``; both derivatives from it (closed form)
``abs``        ``|u|``              ``mt (2 Phi(mt/s) - 1) + 2 s phi(mt/s)``, ``s = sqrt(vt)``;
                                    ``dE/dmt = 2 Phi(mt/s) - 1``, ``dE/dvt = phi(mt/s) / s``
``square``     ``u^2``              ``mt^2 + vt``; ``2 mt``, ``1``
``logistic``   ``log(1 + exp u)``   quadrature, below
=============  ===================  ==================================================================

Logistic (softplus). Gauss-Hermite with ``n`` nodes is accurate to rounding while ``vt`` is
small (``vt <= 2``: the softplus is analytic in the strip ``|Im u| < pi`` and the nodes
``mt + sqrt(2 vt) x_i`` stay within a few units), but loses digits as ``vt`` grows (1e-11 for
``E[sigma']`` at ``vt = 4``, 1e-4 for the value at ``vt = 100``, with 100 nodes). For ``vt > 2`` the split ``softplus(u) = max(u, 0) + log(1 + e^{-|u|})``
is used: ``E[max(u, 0)] = mt Phi(mt/s) + s phi(mt/s)`` in closed form, and the even remainder
``h(u) = log(1 + e^{-|u|})`` (smooth on ``u > 0``, negligible beyond 38) is integrated as
``int_0^38 h(t) [N(t) + N(-t)] dt`` by composite Gauss-Legendre on graded panels (120 nodes, SPLIT_NODES), on
which the Gaussian density (sd ``> 2``) is well resolved. Likewise
``E[sigma(u)] = Phi(mt/s) + int_0^38 sigma(-t) [N(-t) - N(t)] dt`` and
``E[sigma'(u)] = int_0^38 sigma'(t) [N(t) + N(-t)] dt``. Checked against adaptive quadrature to 1e-11 relative
(``vt`` up to 400) and against the same panels with 48 nodes to ``4e-15 max(1, |value|)`` over ``mt in [-40, 40]``,
``vt in [2, 1e5]`` (tests/test_klprox_inputs.py).
"""
from __future__ import annotations

import bisect
import functools
from types import SimpleNamespace

import numpy as np
from scipy.special import expit, ndtr

_SQRT2PI = np.sqrt(2.0 * np.pi)
_SQRT2 = float(np.sqrt(2.0))


def _phi(z):
    with np.errstate(over="ignore"):  # z^2 = inf far in the tails: the density is 0
        return np.exp(-0.5 * z * z) / _SQRT2PI


class Family:
    """A likelihood family ``l(u)`` of a 1-D predictor: ``expect(mt, vt) -> (E, dE/dmt, dE/dvt)``."""

    kind: str = ""
    name: str = ""
    #: the expectation is a closed form (the proximal-point variant needs it)
    closed_form: bool = False
    #: ``E = f(mt) + <Gamma, Vt>/2`` with a constant ``Gamma`` and ``d^2 f = Gamma`` on 1-D rows (``u^2``) or given by
    #: ``mean_hessian`` (groups): the mean and the covariance separate in the ELBO (``LikelihoodView.decoupled``)
    separable: bool = False
    #: ``higher(mt, vt)`` is a closed form (the fixed-point Newton step of the solver, ``NEWTON_FP``)
    higher_moments: bool = False
    #: the expectation grows exponentially with the predictor variance (``exp(mt + vt/2)``), which makes the
    #: covariance map stiff under wide priors: the rows that call for the fixed-point Newton step
    variance_stiff: bool = False

    def expect(self, mt, vt):  # pragma: no cover - abstract
        raise NotImplementedError

    def higher(self, mt, vt):  # pragma: no cover - abstract
        """``(E[l^(3)(u)], E[l^(4)(u)])``, ``u ~ N(mt, vt)``. By Price's theorem ``d(dE/dmt)/dvt = E[l^(3)]/2`` and
        ``d(2 dE/dvt)/dvt = E[l^(4)]/2``: the derivatives of the fixed-point equations the Newton step needs."""
        raise NotImplementedError


class ExpFamily(Family):
    kind, name = "exp", "exp(u) (Poisson)"
    closed_form = True
    higher_moments = True
    variance_stiff = True

    def expect(self, mt, vt):
        with np.errstate(over="ignore"):
            e = np.exp(mt + 0.5 * vt)
        return e, e, 0.5 * e

    def higher(self, mt, vt):
        with np.errstate(over="ignore"):
            e = np.exp(mt + 0.5 * vt)
        return e, e


class AbsFamily(Family):
    kind, name = "abs", "|u| (Laplace)"
    closed_form = True

    def expect(self, mt, vt):
        s = np.sqrt(vt)
        z = mt / s
        cdf = ndtr(z)
        pdf = _phi(z)
        return mt * (2.0 * cdf - 1.0) + 2.0 * s * pdf, 2.0 * cdf - 1.0, pdf / s


class SqPosFamily(Family):
    r"""``l(u) = max(u, 0)^2`` (the squared hinge: CVXPY's ``log_normcdf`` pieces, the L2-SVM loss). With
    ``s = sqrt(vt)``, ``z = mt / s`` (derivation in docs/klprox.md §2):

        E = (mt^2 + vt) Phi(z) + mt s phi(z),   dE/dmt = 2 (mt Phi(z) + s phi(z)),   dE/dvt = Phi(z)

    (``dE/dvt = E[l'']/2 = P(u > 0)``: Price's theorem). For ``z >= 0`` every term is nonnegative. For ``z < 0`` the
    terms cancel (``E`` is ``O(phi(z) / |z|^3)`` while the terms are ``O(phi(z) / |z|)``); there, with ``t = -z > 0``,

        E = vt phi(t) M2(t),   dE/dmt = 2 s phi(t) M1(t),   M_k(t) = int_0^inf r^k exp(-t r - r^2/2) dr

    (``M_k = psi_k / phi`` with the tail moments ``psi_k(t) = int_t^inf (x - t)^k phi(x) dx``; substitute
    ``x = t + r``). ``M1 = 1 - t R``, ``M2 = (1 + t^2) R - t`` with the Mills ratio ``R = Phi(-t)/phi(t)``
    (``scipy.special.erfcx``) for ``t <= 2``, where they lose at most 1.5 digits; beyond, the integrals of positive
    terms by generalized Gauss-Laguerre (``r = y/t``: weight ``y^k e^-y``, smooth factor ``exp(-y^2 / (2 t^2))``;
    40 nodes: 1.3e-15 relative at ``t = 2``, rounding beyond). ``vt = 0`` gives the point values ``(max(mt, 0)^2,
    2 max(mt, 0), [mt > 0])``."""

    kind, name = "sqpos", "max(u, 0)^2 (squared hinge; probit via log_normcdf)"
    closed_form = True

    def expect(self, mt, vt):
        mt, vt = np.asarray(mt, dtype=float), np.asarray(vt, dtype=float)
        pos = vt > 0
        s = np.sqrt(np.where(pos, vt, 1.0))
        with np.errstate(over="ignore", invalid="ignore"):
            z = np.where(pos, mt / s, 0.0)
            cdf = ndtr(z)
            ph = _phi(z)
            tail = z < 0
            E = (mt * mt + vt) * cdf + mt * s * ph
            d1 = 2.0 * (mt * cdf + s * ph)
            if np.any(tail):
                t = -z[tail]
                m1, m2 = tail_moments(t)
                E[tail] = vt[tail] * ph[tail] * m2
                d1[tail] = 2.0 * s[tail] * ph[tail] * m1
        pm = np.maximum(mt, 0.0)
        return (np.where(pos, E, pm * pm), np.where(pos, d1, 2.0 * pm),
                np.where(pos, cdf, (mt > 0).astype(float)))


#: generalized Gauss-Laguerre nodes of :func:`tail_moments` beyond ``TAIL_SWITCH`` (measured against 40-digit
#: mpmath: 1.3e-15 relative at t = 2, 4.4e-16 at t = 3 and beyond; 30 nodes: 5e-13 at t = 2)
TAIL_NODES = 40
TAIL_SWITCH = 2.0


@functools.cache
def _laguerre(k):
    from scipy.special import roots_genlaguerre
    y, w = roots_genlaguerre(TAIL_NODES, k)
    y.flags.writeable = w.flags.writeable = False
    return y, w


def tail_moments(t):
    """``(M1(t), M2(t))``, ``M_k(t) = int_0^inf r^k exp(-t r - r^2/2) dr`` for ``t > 0`` (:class:`SqPosFamily`):
    through the Mills ratio for ``t <= TAIL_SWITCH``, by Gauss-Laguerre in ``y = t r`` beyond,
    ``M_k = t^-(k+1) int_0^inf y^k e^-y exp(-y^2 / (2 t^2)) dy``, a sum of positive terms."""
    from scipy.special import erfcx
    t = np.asarray(t, dtype=float)
    m1, m2 = np.empty_like(t), np.empty_like(t)
    near = t <= TAIL_SWITCH
    if np.any(near):
        tn = t[near]
        R = np.sqrt(np.pi / 2.0) * erfcx(tn / _SQRT2)
        m1[near] = 1.0 - tn * R
        m2[near] = (1.0 + tn * tn) * R - tn
    far = ~near
    if np.any(far):
        tf = t[far]
        with np.errstate(divide="ignore", over="ignore"):
            inv = 1.0 / tf
            for k, out in ((1, m1), (2, m2)):
                y, w = _laguerre(k)
                f = np.exp(-0.5 * np.square(np.outer(inv, y)))      # (rows, nodes)
                out[far] = (f @ w) * inv ** (k + 1)
    return m1, m2


class SquareFamily(Family):
    kind, name = "square", "u^2 (Gaussian)"
    closed_form = True
    separable = True

    higher_moments = True

    def expect(self, mt, vt):
        return mt * mt + vt, 2.0 * mt, np.ones_like(mt)

    def higher(self, mt, vt):
        z = np.zeros_like(mt)
        return z, z


#: Gauss-Hermite nodes of the logistic expectation by predictor variance (at most the ``quadrature_nodes`` option):
#: largest difference from a 200-node rule, value and both derivatives, over means in [-30, 30] (measured):
#: 1.4e-14 (8 nodes, vt <= 0.02; 9.9e-16 relative), 1.4e-14 (10, <= 0.05; 1.1e-15), 1.1e-14 (16 nodes, vt <= 0.1),
#: 1.2e-14 (24, <= 0.5), 1.1e-14 (48, <= 1), 5.9e-14 (64, <= 2)
HERMITE_NODES = ((0.02, 8), (0.05, 10), (0.1, 16), (0.5, 24), (1.0, 48), (2.0, 64))


@functools.lru_cache(maxsize=None)
def _gh(n):
    """Gauss-Hermite rule for ``N(0, 1)`` (read-only arrays, computed once per size: ``hermgauss(100)`` takes
    about 10 ms, a tenth of a small solve)."""
    x, w = np.polynomial.hermite.hermgauss(int(n))
    x, w = x * np.sqrt(2.0), w / np.sqrt(np.pi)
    x.flags.writeable = w.flags.writeable = False
    return x, w


#: the split rule's panels on [0, 38] and their Gauss-Legendre node counts (120 nodes): per panel the fewest nodes whose
#: largest error against a 48-node rule (the three integrals of LogisticFamily._split, over m in [-40, 40] and
#: v in [2, 1e5], absolute and relative to the row's E, dE/dm, dE/dv) is within 1.5x of 12 nodes' (the earlier rule,
#: 156 nodes), whose errors there are rounding: 1e-16 absolute, <= 2e-15 relative on the panels below 18 (docs/klprox.md,
#: section 2). The panels near 0, where h = log(1 + e^-t) has its poles (t = +-i pi), take 6-8 nodes; the far ones keep
#: 12: they only matter for rows far in a tail, whose tiny values are then still as accurate relative to themselves
SPLIT_EDGES = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 11.0, 14.0, 18.0, 23.0, 29.0, 38.0)
SPLIT_NODES = (6, 6, 8, 7, 7, 9, 9, 10, 10, 12, 12, 12, 12)


@functools.lru_cache(maxsize=None)
def _panels():
    """The split rule's nodes ``t`` and weights ``tw`` on [0, 38] and what every evaluation reuses: the node products'
    right factor ``[1; t]`` (2 x n) and the weights times ``h(t) = log(1 + e^-t)``, ``sigma(-t)`` and ``sigma'(t)``
    (read-only, computed once)."""
    return split_panels(SPLIT_EDGES, SPLIT_NODES)


def split_panels(edges, nodes):
    """:func:`_panels` of the panels ``edges`` with ``nodes`` Gauss-Legendre nodes each."""
    t, tw = [], []
    for a, b, n in zip(edges[:-1], edges[1:], nodes):
        x, w = np.polynomial.legendre.leggauss(n)
        t.append((a + b) / 2 + (b - a) / 2 * x)
        tw.append((b - a) / 2 * w)
    t, tw = np.concatenate(t), np.concatenate(tw)
    T = np.empty((2, t.size))
    T[0] = 1.0
    T[1] = t
    sneg = expit(-t)
    out = SimpleNamespace(t=t, tw=tw, T=T, hw=tw * np.log1p(np.exp(-t)), snegw=tw * sneg, sdw=tw * (sneg * (1.0 - sneg)))
    for a in vars(out).values():
        a.flags.writeable = False                       # shared by every LogisticFamily
    return out


@functools.lru_cache(maxsize=None)
def _gh_right(n):
    """``[1; x]`` (2 x n) of the ``n``-node Gauss-Hermite rule: the right factor of :func:`_nodes_and_exp`'s product
    (read-only, formed once per rule)."""
    X = np.empty((2, n))
    X[0] = 1.0
    X[1] = _gh(n)[0]
    X.flags.writeable = False
    return X


def _nodes_and_exp(mt, vt, x):
    """The Gauss-Hermite node values ``u = mt + sqrt(vt) x`` (rows: predictors), ``|u|`` and ``exp(-|u|)``. ``u`` is
    one BLAS product ``[mt, sqrt(vt)] [1; x]`` (k = 2: a single pass writing the N x n array, a quarter of the time
    of an outer product and a broadcast addition on a1a's 1605 x 16), the rest in place."""
    M = np.empty((mt.size, 2))
    M[:, 0] = mt
    np.sqrt(vt, out=M[:, 1])
    u = M @ _gh_right(x.size)
    a = np.abs(u)
    e = np.negative(a)
    np.exp(e, out=e)
    return u, a, e

#: _by_grade evaluates every row with the largest node count present when that costs at most this many node
#: evaluations in all: below it the extra nodes cost less than the calls and scatters of one more grade (heart_statlog's
#: GP, 62 rows in two grades: one call of 64 nodes); more nodes than a row's grade needs are at least as accurate
MERGE_NODES = 8192


@functools.lru_cache(maxsize=None)
def _bounds(grades):
    """The variance bounds of ``grades`` (a tuple of ``(bound, nodes)``), formed once."""
    return tuple(vmax for vmax, _ in grades)


def _by_grade(grades, rule, mt, vt, k):
    """The ``k`` outputs of ``rule(mt, vt, x, w)`` with the Gauss-Hermite rule of each row's variance grade
    (``grades``: ``(variance bound, nodes)`` in increasing order); one call without copies when a single grade
    holds every row (a1a at a small prior variance: all rows in the 16-node grade) or when the rows are few enough
    for the largest grade present (MERGE_NODES)."""
    # the merged call needs only the grades of the smallest and the largest variance (two reductions and bisect on
    # the bounds, which agrees with searchsorted's side='left'); with a NaN (min and max are NaN) every row's grade
    top, bounds = len(grades) - 1, _bounds(grades)
    vlo, vhi = float(vt.min()), float(vt.max())
    g = None
    if vlo == vlo and vhi == vhi:
        lo, hi = min(bisect.bisect_left(bounds, vlo), top), min(bisect.bisect_left(bounds, vhi), top)
    else:
        g = np.searchsorted(bounds, vt, side="left")    # grade of every row: bounds[g - 1] < vt <= bounds[g]
        np.minimum(g, top, out=g)                       # (NaN sorts last: the widest rule)
        lo, hi = int(g.min()), int(g.max())
    if lo == hi or mt.size * grades[hi][1] <= MERGE_NODES:
        return rule(mt, vt, *_gh(grades[hi][1]))
    if g is None:
        g = np.minimum(np.searchsorted(bounds, vt, side="left"), top)
    out = [np.empty_like(mt) for _ in range(k)]
    for j in np.flatnonzero(np.bincount(g)):
        sel = g == j
        for o, r in zip(out, rule(mt[sel], vt[sel], *_gh(grades[j][1]))):
            o[sel] = r
    return tuple(out)


class LogisticFamily(Family):
    """``softplus(u) = log(1 + exp u)``: Gauss-Hermite for ``vt <= vt_switch``, else the split rule."""

    kind, name = "logistic", "log(1 + exp(u)) (logistic)"
    closed_form = False
    #: ``l(u) - u = l(-u)``: rows ``l(u) - t u`` are evaluated without cancellation (view.LikelihoodView._reflect)
    reflects = True
    vt_switch = 2.0

    def __init__(self, nodes: int = 100):
        self.set_nodes(nodes)
        self.panels = _panels()

    def set_nodes(self, nodes: int):
        self.nodes = int(nodes)
        # graded rule: rows with a small predictor variance need fewer nodes (HERMITE_NODES); the option is the cap.
        # (variance bound, node count): each rule is formed when first used (the last, of `nodes` nodes, only for
        # variances above vt_switch, which expect() integrates by the split rule: hermgauss(100) was 26 ms of a
        # process's first solve)
        self.grades = tuple((vmax, min(n, self.nodes)) for vmax, n in HERMITE_NODES) + ((np.inf, self.nodes),)

    def _hermite(self, mt, vt):
        return _by_grade(self.grades, self._hermite_rule, mt, vt, 3)

    @staticmethod
    def _hermite_rule(mt, vt, x, w):
        # one exponential for both: softplus(u) = max(u, 0) + log1p(e), sigmoid(u) = 1/(1 + e) or e/(1 + e),
        # e = exp(-|u|) (the work of this solver on a1a is mostly these N x n evaluations); in place: the passes over
        # the N x n arrays are the cost. max(u, 0) = (u + |u|) / 2 exactly (u + |u| is 2u or exactly 0), two
        # additions' time against np.maximum's (which checks for NaN)
        u, a, e = _nodes_and_exp(mt, vt, x)
        sp = np.log1p(e)
        a += u
        a *= 0.5                                      # max(u, 0)
        sp += a
        inv = e + 1.0
        np.reciprocal(inv, out=inv)
        e *= inv                                      # e / (1 + e) = sigmoid(-|u|)
        np.multiply(e, inv, out=a)                    # sigmoid'(u)
        d2 = a @ w
        np.copyto(e, inv, where=u >= 0.0)             # sigmoid(u)
        return sp @ w, e @ w, 0.5 * d2

    def _hermite_pair(self, mt, vt):
        """``(E[l(u)], E[l'(u)], E[l''(u)]/2, E[l(-u)], E[l'(-u)])`` by the graded Gauss-Hermite rule of
        :meth:`_hermite`, both from one set of node values (the exponential, ``log1p`` and reciprocal of
        ``|u|`` are shared: ``l(-u) = max(-u, 0) + log1p(e^-|u|)``, ``sigma(-u)`` the other of ``1/(1 + e)``,
        ``e/(1 + e)``; ``l''`` is even)."""
        return _by_grade(self.grades, self._hermite_pair_rule, mt, vt, 5)

    @staticmethod
    def _hermite_pair_rule(mt, vt, x, w):
        # E[l(+-u)] = E[max(+-u, 0)] + E[log1p(e^-|u|)], each a sum of terms of one sign (nothing cancels), with
        # max(+-u, 0) = (|u| +- u) / 2 exactly
        u, a, e = _nodes_and_exp(mt, vt, x)
        lg = np.log1p(e)
        L = lg @ w
        np.add(a, u, out=lg)
        pp = 0.5 * (lg @ w)                           # E[max(u, 0)]
        np.subtract(a, u, out=lg)
        pn = 0.5 * (lg @ w)                           # E[max(-u, 0)]
        inv = e + 1.0
        np.reciprocal(inv, out=inv)
        e *= inv                                      # sigmoid(-|u|)
        np.multiply(e, inv, out=lg)                   # sigmoid'(u)
        d2 = lg @ w
        pos = u >= 0.0
        sneg = np.where(pos, e, inv)                  # sigmoid(-u)
        np.copyto(e, inv, where=pos)                  # sigmoid(u)
        return pp + L, e @ w, 0.5 * d2, pn + L, sneg @ w

    def expect_pair(self, mt, vt):
        """``E[l(u)]``, ``dE/dmt``, ``dE/dvt`` and ``E[l(-u)]``, ``dE[l(-u)]/d(-mt)`` at once (``dE/dvt`` is the same
        for both): the rows ``(1 - t) l(u) + t l(-u)`` of :meth:`LikelihoodView._reflect` with a fractional ``t``
        (the minimum-norm split of ``-y u`` when there are more rows than variables)."""
        mt, vt = np.asarray(mt, dtype=float), np.asarray(vt, dtype=float)
        small = vt <= self.vt_switch
        if small.all():
            return self._hermite_pair(mt, vt)
        out = [np.empty_like(mt) for _ in range(5)]
        if small.any():
            for o, r in zip(out, self._hermite_pair(mt[small], vt[small])):
                o[small] = r
        big = ~small
        m, v = mt[big], vt[big]
        for o, r in zip(out, self._split(m, v) + self._split(-m, v)[:2]):
            o[big] = r
        return tuple(out)

    def _split(self, mt, vt):
        pan, n = self.panels, mt.size
        s = np.sqrt(vt)
        z = mt / s
        # N(t | mt, vt) and N(-t | mt, vt) at the panel nodes, without the factor 1/(sqrt(2 pi) s) (applied to the
        # sums): exp(-x^2) with x = (t -+ mt) k, k = 1/(s sqrt 2), both from one BLAS product [+-mt k, k] [1; t]
        # (k = 2; the rows of +mt first), and squared, negated and exponentiated in one pass each
        k = 1.0 / (_SQRT2 * s)
        M = np.empty((2 * n, 2))
        np.multiply(mt, k, out=M[:n, 0])
        np.negative(M[:n, 0], out=M[n:, 0])
        M[:, 1].reshape(2, n)[...] = k
        X = M @ pan.T                                 # (t + mt) k, then (t - mt) k
        with np.errstate(over="ignore"):              # x^2 = inf far in the tails: the density is 0
            np.square(X, out=X)
            np.negative(X, out=X)
            np.exp(X, out=X)
            phi = np.exp(-0.5 * z * z) / _SQRT2PI     # _phi(z), inside the same error state
        neg, pos = X[:n], X[n:]
        c = 1.0 / (_SQRT2PI * s)
        odd = neg - pos                               # N(-t) - N(t)
        neg += pos                                    # even part: N(t) + N(-t)
        cdf = ndtr(z)
        e = mt * cdf + s * phi + c * (neg @ pan.hw)
        d1 = cdf + c * (odd @ pan.snegw)
        d2 = (0.5 * c) * (neg @ pan.sdw)
        return e, d1, d2

    def expect(self, mt, vt):
        mt, vt = np.asarray(mt, dtype=float), np.asarray(vt, dtype=float)
        small = vt <= self.vt_switch
        if small.all():
            return self._hermite(mt, vt)
        out = (np.empty_like(mt), np.empty_like(mt), np.empty_like(mt))
        # the rows of each rule by index (gathers and scatters through a boolean mask cost 3x as much at N ~ 100)
        for sel, fn in ((np.flatnonzero(small), self._hermite), (np.flatnonzero(~small), self._split)):
            if sel.size:
                for o, r in zip(out, fn(mt[sel], vt[sel])):
                    o[sel] = r
        return out


#: Gauss-Hermite nodes per dimension of the softmax rule by the largest predictor standard deviation
#: (whitened direction) of the group: measured 1-D error of the rule on
#: ``log(1 + e^u)`` (value and both derivatives) <= 1e-11 up to each bound (docs/klprox.md, section 2)
SOFTMAX_NODES = ((0.5, 16), (1.0, 32), (1.5, 64), (2.0, 100))
#: nodes per dimension above the last bound of the table (accuracy then degrades: 1e-8 at sd 3, 1e-6 at sd 4)
SOFTMAX_NODES_WIDE = 128
#: largest J (classes - 1) of a softmax group
MAX_SOFTMAX_DIM = 3
#: node values (rows x J x nodes) per block of rows of the softmax rule: its temporaries then stay in the cache and in
#: memory the allocator reuses (blocks of 2e6 values, 16 MB, were fresh mmap'd pages each time: wine's 88 rows at
#: 2912 nodes took 8.7 ms per evaluation, a third of it in the kernel's page faults; 2.4 ms in blocks of 2^16,
#: docs/klprox.md, section 2b)
SOFTMAX_CHUNK = 1 << 16
#: the tensor rules by (nodes per dimension, J), shared by every SoftmaxFamily (each solve makes its own family)
_RULES = {}


class SoftmaxFamily(Family):
    r"""``l(d) = log(1 + sum_j exp d_j)`` of a J-dimensional predictor ``d ~ N(mt, Vt)`` (a softmax row
    of K = J + 1 classes written relative to its base class: ``lse(u) = u_0 + l(u_1 - u_0, ...)``).

    ``expect_group(mt (G, J), Vt (G, J, J)) -> (E (G,), E[grad l] (G, J), E[hess l] / 2 (G, J, J))``,
    ``grad l = p``, ``hess l = diag(p) - p p^T``, ``p_j = e^{d_j} / (1 + sum e^d)`` (Bonnet and Price in
    J dimensions). Rule: ``d = mt + Q Lambda^{1/2} xi`` with ``Vt = Q Lambda Q^T`` and a tensor
    Gauss-Hermite rule in ``xi`` (nodes of product weight below ``1e-18`` dropped, their total weight
    is below ``4e-15`` for J <= 3), ``n`` nodes per dimension from :data:`SOFTMAX_NODES` by the group's
    largest ``sqrt(Lambda)``, lowered while the rule keeps more than ``max_points`` nodes (J = 3:
    64 nodes per dimension at most). Groups of more than :data:`MAX_SOFTMAX_DIM` + 1 classes
    are rejected by the likelihood view: a tensor rule cannot reach this accuracy there."""

    kind, name = "softmax", "log(sum_k exp(u_k)) (multinomial)"
    closed_form = False
    #: largest J this rule is accurate for
    max_dim = MAX_SOFTMAX_DIM
    bound = False

    def __init__(self, max_points: int = 40000, nodes: int | None = None, boost: float = 1.0):
        self.max_points = int(max_points)
        self.fixed_nodes = nodes
        #: node-count factor (the a-posteriori error estimate compares the rule with a 1.5x richer one)
        self.boost = float(boost)
        self.last_nodes = 0

    def nodes_for(self, sd_max, J):
        """Nodes per dimension for a group whose largest predictor standard deviation is ``sd_max``."""
        n = self.fixed_nodes
        if n is None:
            n = next((k for bound, k in SOFTMAX_NODES if sd_max <= bound), SOFTMAX_NODES_WIDE)
            n = round(n * self.boost)
        return self._capped(n, J)

    def _capped(self, n, J):
        """``n`` lowered while the rule keeps more than ``max_points`` nodes."""
        key = ("cap", n, J, self.max_points)
        if key not in _RULES:
            c = n
            while c > 8 and self.rule(c, J)[1].size > self.max_points:
                c = int(c * 0.8)
            _RULES[key] = c
        return _RULES[key]

    def _node_counts(self, sd, J):
        """:meth:`nodes_for` of every group's ``sd`` (one table look-up per grade, not per group)."""
        if self.fixed_nodes is not None:
            return np.full(sd.size, self.nodes_for(0.0, J), dtype=int)
        bounds = np.array([b for b, _ in SOFTMAX_NODES])
        counts = [self._capped(round(k * self.boost), J) for k in [k for _, k in SOFTMAX_NODES] + [SOFTMAX_NODES_WIDE]]
        return np.array(counts, dtype=int)[np.searchsorted(bounds, sd, side="left")]

    @staticmethod
    def rule(n, J):
        """The pruned tensor rule ``(nodes (M, J), weights (M,))`` of ``n`` nodes per dimension (formed once per
        process: the Golub-Welsch eigenproblem of ``hermgauss`` costs milliseconds)."""
        key = (n, J)
        if key not in _RULES:
            x, w = np.polynomial.hermite.hermgauss(n)
            x, w = x * np.sqrt(2.0), w / np.sqrt(np.pi)
            grids = np.meshgrid(*([x] * J), indexing="ij")
            wts = np.ones([n] * J)
            for j, g in enumerate(np.meshgrid(*([w] * J), indexing="ij")):
                wts = wts * g
            X = np.stack([g.ravel() for g in grids], axis=1)
            W = wts.ravel()
            keep = W > 1e-18
            _RULES[key] = (X[keep], W[keep])
        return _RULES[key]

    @staticmethod
    def _transposed(n, J):
        """The nodes of :meth:`rule` as a contiguous (J, M) array."""
        key = ("T", n, J)
        if key not in _RULES:
            _RULES[key] = np.ascontiguousarray(SoftmaxFamily.rule(n, J)[0].T)
        return _RULES[key]

    def expect_group(self, mt, Vt):
        mt, Vt = np.asarray(mt, dtype=float), np.asarray(Vt, dtype=float)
        G, J = mt.shape
        lam, Q = np.linalg.eigh(0.5 * (Vt + np.swapaxes(Vt, 1, 2)))
        S = Q * np.sqrt(np.maximum(lam, 0.0))[:, None, :]          # Vt = S S^T
        sd = np.sqrt(np.maximum(lam.max(axis=1), 0.0)) if G else np.zeros(0)
        ns = self._node_counts(sd, J)
        self.last_nodes = int(ns.max()) if G else 0
        E, d1, d2 = np.empty(G), np.empty((G, J)), np.empty((G, J, J))
        for n in np.unique(ns):           # groups of one node count together
            idx = np.flatnonzero(ns == n)
            X, W = self.rule(int(n), J)
            XT = self._transposed(int(n), J)
            step = max(1, SOFTMAX_CHUNK // max(X.shape[0] * J, 1))
            for s0 in range(0, idx.size, step):
                sl = idx[s0:s0 + step]
                # (g, J, M) layout: the reductions over the J classes are then elementwise operations on
                # contiguous node vectors (3x faster than reducing a trailing axis of length 2 or 3)
                d = np.matmul(S[sl], XT)
                d += mt[sl, :, None]
                mx = d.max(axis=1)
                np.maximum(mx, 0.0, out=mx)
                d -= mx[:, None, :]
                np.exp(d, out=d)
                tot = d.sum(axis=1)
                tot += np.exp(-mx)
                lse = np.log(tot)
                lse += mx
                E[sl] = lse @ W
                d /= tot[:, None, :]                                   # p, (g, J, M)
                pw = d * W
                d1[sl] = pw.sum(axis=2)
                pp = np.matmul(pw, np.swapaxes(d, 1, 2))
                d2[sl] = 0.5 * (d1[sl][:, :, None] * np.eye(J)[None] - pp)
        return E, d1, d2


class SoftmaxBoundFamily(Family):
    r"""Boehning's quadratic bound for ``l(d) = log(1 + sum_j exp d_j)``, any J (option ``softmax='bound'``).

    ``grad^2 l = diag(p) - p p^T <= H = (I - 1 1^T / (J + 1)) / 2`` for every ``d`` (Boehning 1992), so
    ``l(d) <= l(mt) + p(mt)^T (d - mt) + (d - mt)^T H (d - mt) / 2`` and, taking the expectation,

        E[l(d)] <= l(mt) + tr(H Vt) / 2,     d ~ N(mt, Vt),

    a closed-form upper bound (expansion point at the mean, where the bound's gradient in the expansion point
    vanishes). With it the solver maximises a *lower bound* on the ELBO: ``-ELBO <=`` the reported objective.
    Its gradients: ``p(mt)`` and ``H / 2`` (a constant curvature)."""

    kind, name = "softmax", "log(sum_k exp(u_k)) (multinomial, Boehning bound)"
    closed_form = True
    max_dim = None
    bound = True
    separable = True

    def expect_group(self, mt, Vt):
        mt, Vt = np.asarray(mt, dtype=float), np.asarray(Vt, dtype=float)
        G, J = mt.shape
        mx = np.maximum(mt.max(axis=1), 0.0)
        ed = np.exp(mt - mx[:, None])
        tot = np.exp(-mx) + ed.sum(axis=1)
        H = 0.5 * (np.eye(J) - 1.0 / (J + 1))
        E = mx + np.log(tot) + 0.5 * np.einsum("jk,gkj->g", H, Vt)
        return E, ed / tot[:, None], np.broadcast_to(0.5 * H, (G, J, J)).copy()

    def mean_hessian(self, mt):
        """``grad^2 l(mt) = diag(p) - p p^T`` (G x J x J): the bound's expectation depends on the mean only through
        ``l(mt)``, so this is its exact Hessian in ``mt`` (the Newton mean step, ``LikelihoodView.mean_curvature``)."""
        mt = np.asarray(mt, dtype=float)
        mx = np.maximum(mt.max(axis=1), 0.0)
        ed = np.exp(mt - mx[:, None])
        p = ed / (np.exp(-mx) + ed.sum(axis=1))[:, None]
        out = -p[:, :, None] * p[:, None, :]
        idx = np.arange(mt.shape[1])
        out[:, idx, idx] += p
        return out


def family_table(nodes: int = 100) -> dict:
    """``kind -> Family``: atom kinds of :data:`varopt.program.atoms.ATOMS` that have a Gaussian
    expectation, plus ``logistic`` (two-entry log-sum-exp groups) and ``softmax`` (groups of K > 2
    entries, a (K-1)-dimensional predictor)."""
    return {f.kind: f for f in (ExpFamily(), AbsFamily(), SqPosFamily(), SquareFamily(), LogisticFamily(nodes),
                                     SoftmaxFamily())}

