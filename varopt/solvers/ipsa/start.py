"""A strictly feasible starting point for IPSA (Fig. 2.1 needs ``c(x_0) < 0``).

* A user point (option ``x0``, or the model's initial values) is used when it is strictly
  feasible; an explicit ``x0`` that is not strictly feasible is an error.
* **Bounds only**: ``x_i = lb_i + 1`` / ``ub_i - 1`` / ``0`` for one-sided / free variables and
  the midpoint for boxes narrower than 2 (``x = 1`` for ``x >= 0``, as in the author's code).
* **Linear rows, each with a loosening variable** (a variable that, moved one way, increases the
  slack of every row it enters and has no bound that way; the L1 box form ``-u_j <= w_j <= u_j``,
  Carbonetto 2009, eq. 2.64, has ``u_j``): closed form, :func:`loosened_interior`: the bounds
  point above, then each row whose loosening variable is less than 1 from the row's boundary moves
  that variable to 1 from it (``w = 0``, ``u = 1`` for the box form, the analogue of the split
  form's ``w+ = w- = 1``), then centred as the LP's point is below (no LP: a third of the box form's
  set-up). Without the centring the on-line box-form estimates were less accurate (12 small lassos,
  30 passes: mean error 0.048 against 0.040 from a centred start). Mirror row pairs (the box form
  itself) have that centre in closed form, :func:`mirror_pair_centre` (``w = 0``, ``u = 2``).
* **Other linear rows**: a phase-1 LP through :mod:`varopt.lpqp` maximises the common normalised
  slack ``t``: ``max t  s.t.  (G_r x - h_r)/||G_r|| + t <= 0,  lb_i + t <= x_i <= ub_i - t,
  t <= 1``. ``t* <= 0`` means there is no strict interior (Slater fails) -> error. When cheap
  (n <= 1000) the LP point is then moved towards the analytic centre by damped Newton steps on
  ``-sum log s_i(x) + ||x - x_lp||^2 / 2`` (the proximal term keeps it defined on unbounded sets).
* **Convex nonlinear constraints**: the same max-slack problem with the nonlinear rows
  ``(body_j(x) - hi_j)/scale_j + t <= 0`` is solved by SLSQP (scipy) from the LP point.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ...errors import InputDataError, ModelStructureError
from ...lpqp import solve_lp


def _solve_lp(c, A, lo, hi, lb, ub):
    res = solve_lp(c, A=A, row_lo=lo, row_hi=hi, lb=lb, ub=ub)
    return res.status, (None if res.x is None else np.asarray(res.x, dtype=float))


def bounds_interior(lb, ub):
    x = np.zeros(lb.size)
    fl, fu = np.isfinite(lb), np.isfinite(ub)
    both = fl & fu
    only_l, only_u = fl & ~fu, fu & ~fl
    x[only_l] = lb[only_l] + 1.0
    x[only_u] = ub[only_u] - 1.0
    w = ub[both] - lb[both]
    x[both] = np.where(w > 2.0, lb[both] + 1.0, lb[both] + 0.5 * w)
    return x


def _linear_rows(cons):
    """All linear constraints (bounds included) as ``Gx <= h`` with unit-norm rows: the rows
    ``-e_i`` (lower bounds), ``e_i`` (upper bounds), then ``cons.G``, each divided by its norm (the
    squares summed in the row's order from 0), assembled as arrays (no sparse products)."""
    G = cons.G.tocsr()
    nb = cons.n_lb + cons.n_ub
    rows = nb + G.shape[0]
    cnt = np.concatenate([np.ones(nb, dtype=np.int64), np.diff(G.indptr)])
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(cnt, out=indptr[1:])
    indices = np.concatenate([cons.lb_idx, cons.ub_idx, G.indices]).astype(np.int64)
    data = np.concatenate([-np.ones(cons.n_lb), np.ones(cons.n_ub), G.data])
    h = np.concatenate([-cons.lb, cons.ub, cons.h])
    rid = np.repeat(np.arange(rows), cnt)
    nrm = np.sqrt(np.bincount(rid, weights=data * data, minlength=rows))
    inv = 1.0 / nrm
    return sp.csr_matrix((inv[rid] * data, indices, indptr), shape=(rows, cons.n)), h / nrm


def loosened_interior(cons, lb, ub):
    """The closed-form start for linear rows that each have a loosening variable (module
    docstring), or None when some row has none, with nonlinear rows, or when the point fails the
    interior test.

    Rows ``G x <= h``; variable ``j`` loosens upwards when ``ub_j = inf`` and ``G_rj <= 0`` in every
    row (``< 0`` in at least one), downwards when ``lb_j = -inf`` and ``G_rj >= 0``. From
    ``x = bounds_interior(lb, ub)``, row ``r`` with slack ``s_r < |G_rj|`` (``j`` its loosening
    variable of largest ``|G_rj|``, less than 1 from the row's boundary) asks for a move of ``j`` by
    ``1 - s_r / |G_rj|``; each loosening variable moves by the largest move its rows ask for, which
    only increases the slacks of the other rows it enters. O(nnz(G))."""
    G = cons.G.tocsr()
    nr = G.shape[0]
    if nr == 0 or cons.n_nl:
        return None
    # per column, how many positive and negative entries (counts: no CSC copy needed)
    pos = np.bincount(G.indices, weights=G.data > 0, minlength=cons.n)
    neg = np.bincount(G.indices, weights=G.data < 0, minlength=cons.n)
    up = np.isinf(ub) & (pos == 0) & (neg > 0)
    down = np.isinf(lb) & (neg == 0) & (pos > 0)
    rid = np.repeat(np.arange(nr), np.diff(G.indptr))
    mag = np.where(up[G.indices] | down[G.indices], np.abs(G.data), 0.0)
    # per row, the entry of its loosening variable of largest |G_rj| (the first in column order on ties)
    order = np.lexsort((-np.arange(mag.size), mag, rid))
    pick = order[np.r_[rid[order][1:] != rid[order][:-1], True]]
    if pick.size != nr or np.any(mag[pick] == 0):
        return None  # a row without a loosening variable (or without variables)
    best = np.empty(nr, dtype=np.int64)
    best[rid[pick]] = pick
    x = bounds_interior(lb, ub)
    s = cons.h - G @ x
    a = mag[best]
    rows = np.flatnonzero(s < a)
    if rows.size:
        step = np.zeros(cons.n)
        np.maximum.at(step, G.indices[best[rows]], 1.0 - s[rows] / a[rows])
        x = x + np.where(up, step, -step)
    sl = cons.slack(x)
    return x if cons.interior(x, sl) else None


def mirror_pair_centre(cons, x):
    """The point :func:`centre` converges to, in closed form, when the rows are mirror pairs on disjoint
    variable pairs (the L1 box form ``w_j - u_j <= 0``, ``-w_j - u_j <= 0``; Carbonetto 2009, eq. 2.64), else
    None: rows ``2i``, ``2i + 1`` on the same two variables ``w``, ``u``, with coefficients ``(p, c)`` and
    ``(-p, c)``, ``p != 0``, ``c < 0``, ``h = 0``; no bounds, no nonlinear rows; ``x_w = 0`` and ``x_u > 0``
    at the start ``x`` (the point of :func:`loosened_interior`).

    With both rows scaled to unit norm (``s_r = -(±p' w + c' u)``, ``c' < 0``) the centring's objective
    ``-log s_1 - log s_2 + ((w - x_w)^2 + (u - x_u)^2)/2`` has the ``w``-derivative ``p'/s_1 - p'/s_2 + w``,
    zero at ``w = 0`` (``s_1 = s_2``), and along ``w = 0`` the ``u``-derivative ``-2/u + u - x_u``, zero at the
    positive root of ``u^2 - x_u u - 2 = 0``:

        u = (x_u + sqrt(x_u^2 + 8)) / 2        (u = 2 from the box form's x_u = 1, exactly)

    whatever ``p``, ``c``; the objective is strictly convex, so this is its minimiser; variables in no row stay.
    The Newton steps of :func:`centre` (0.65 ms on a1a's box form) stop on their decrement within ~1e-5 of it
    (a1a: ``u = 1.9999999986``)."""
    pairs = mirror_pairs(cons)
    if pairs is None or np.any(x[pairs[0]] != 0) or not np.all(x[pairs[1]] > 0):
        return None
    return _pair_centre(x, pairs[1])


def _pair_centre(x, u):
    """``x`` with ``x_u`` replaced by the root of :func:`mirror_pair_centre`."""
    xc = x.copy()
    u0 = x[u]
    xc[u] = 0.5 * (u0 + np.sqrt(u0 * u0 + 8.0))
    return xc


def mirror_pairs(cons):
    """``(w, u)``, the variables of each mirror row pair of :func:`mirror_pair_centre`, or None when the rows
    are not such pairs (or there are bounds or nonlinear rows)."""
    if cons.n_lb or cons.n_ub or cons.n_nl:
        return None
    G = cons.G
    nr, n = G.shape
    if nr == 0 or nr % 2 or G.nnz != 2 * nr or not np.array_equal(G.indptr, np.arange(0, 2 * nr + 1, 2)) \
            or cons.h.any():
        return None
    idx, val = G.indices.reshape(nr, 2), G.data.reshape(nr, 2)
    swap = idx[:, 0] > idx[:, 1]
    if swap.any():  # each row's two entries in column order
        idx, val = np.where(swap[:, None], idx[:, ::-1], idx), np.where(swap[:, None], val[:, ::-1], val)
    if not np.array_equal(idx[0::2], idx[1::2]) or np.any(idx[:, 0] == idx[:, 1]):
        return None
    if np.bincount(idx.ravel(), minlength=n).max() > 2:  # a variable in two pairs
        return None
    v1, v2 = val[0::2], val[1::2]
    mirror = (v1 == -v2) & (v1 != 0)  # the w column of each pair
    same = (v1 == v2) & (v1 < 0)  # the u column
    first_w = mirror[:, 0] & same[:, 1]
    if not np.all(first_w | (mirror[:, 1] & same[:, 0])):
        return None
    pair = idx[0::2]
    return np.where(first_w, pair[:, 0], pair[:, 1]), np.where(first_w, pair[:, 1], pair[:, 0])


class InfeasibleStart(ModelStructureError):
    """Phase 1 proved the linear constraints and bounds infeasible (ipsa reports status 'infeasible')."""


def phase1_linear(cons, names):
    n = cons.n
    G, h = _linear_rows(cons)
    m = G.shape[0]
    A = sp.hstack([G, sp.csr_matrix(np.ones((m, 1)))]).tocsr()
    c = np.zeros(n + 1)
    c[-1] = -1.0
    lb = np.full(n + 1, -np.inf)
    ub = np.full(n + 1, np.inf)
    ub[-1] = 1.0
    status, xt = _solve_lp(c, A, np.full(m, -np.inf), h, lb, ub)
    if status == "infeasible":
        raise InfeasibleStart("the linear constraints and bounds are infeasible (phase-1 LP infeasible)")
    if status != "optimal" or xt is None:
        raise ModelStructureError(f"phase-1 LP for a strictly feasible start failed (status {status})")
    t = xt[-1]
    x = xt[:-1]
    if t < -1e-9:
        # a feasible point would give t = 0: the rows (normalised) and bounds cannot all hold
        s = h - G @ x
        k = int(np.argmin(s))
        raise InfeasibleStart(
            f"the linear constraints and bounds are infeasible (phase-1 LP: the best common slack is {t:.3g} < 0; "
            f"most violated: {cons.names[k] if k < len(cons.names) else 'row ' + str(k)})")
    if t <= 1e-9:
        s = h - G @ x
        k = int(np.argmin(s))
        raise ModelStructureError(
            f"the constraints have no strict interior (max common slack {t:.3g} <= 0; tight: "
            f"{cons.names[k] if k < len(cons.names) else 'row ' + str(k)}); ipsa needs Slater's condition "
            "c(x) < 0 (Carbonetto 2009, §2.1): remove implied equalities or relax them")
    return x, G, h


class _NewtonMatrix:
    """``G^T diag(w) G + I`` for varying ``w`` on the fixed pattern of ``G`` (CSC, the Newton matrix
    of :func:`centre`), assembled from a map made once: entry ``(i, j)`` is the sum over the rows
    ``r`` of ``G`` holding both ``i`` and ``j``, in ascending ``r`` from 0, of ``(G_ri w_r) G_rj``,
    then ``+ 1`` on the diagonal; exact zeros are left out (as scipy's sparse products leave them
    out). The same products as ``GT @ diags(w) @ G + identity``; the sums of two terms are the same
    in any order (the L1 box form's, whose rows are pairs), longer ones may round otherwise."""

    def __init__(self, G):
        G = sp.csr_matrix(G)
        n = G.shape[1]
        cnt = np.diff(G.indptr)
        rid = np.repeat(np.arange(G.shape[0]), cnt)
        rep = cnt[rid]  # entry p pairs with every entry of its row
        first = np.repeat(np.arange(G.nnz), rep)
        second = np.repeat(G.indptr[rid], rep) + (np.arange(first.size) - np.repeat(np.cumsum(rep) - rep, rep))
        i, j = G.indices[first], G.indices[second]
        diag = np.arange(n)
        key = np.concatenate([j * n + i, diag * n + diag])  # column-major: CSC order
        uniq, slot = np.unique(key, return_inverse=True)  # pairs keep their (ascending row) order per slot
        self.first, self.second, self.rid, self.slot = first, second, rid[first], slot[:first.size]
        self.data = G.data
        self.diag_slot = slot[first.size:]
        self.col, self.row = uniq // n, uniq % n
        self.n = n

    def values(self, w):
        """The entries on the pattern's slots (column-major; exact zeros included)."""
        d = self.data
        v = np.bincount(self.slot, weights=(d[self.first] * w[self.rid]) * d[self.second], minlength=self.col.size)
        v[self.diag_slot] += 1.0
        return v

    def csc(self, w):
        v = self.values(w)
        keep = v != 0
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.col[keep], minlength=self.n), out=indptr[1:])
        return sp.csc_matrix((v[keep], self.row[keep], indptr), shape=(self.n, self.n))


class _BlockNewton:
    """The Newton matrix of :func:`centre` when the rows of ``G`` split the variables into blocks of at most
    ``MAX_BLOCK`` (``layout``, :func:`.block_layout`; the L1 box form's pairs): its entries
    (:meth:`_NewtonMatrix.values`, the same sums) scattered into the flat block storage of
    :class:`.ReducedSystem` and solved block by block (:func:`.solve_blocks`: 2x2 blocks in closed form),
    instead of one sparse LU of the whole matrix (about a third of the centring's time, most of it scipy's
    per-call overhead). The solution differs from the sparse LU's by rounding only."""

    def __init__(self, newton, layout):
        from .constraints import block_bases
        self.groups, local, self.size = layout
        base, bsz = block_bases(self.groups, local.size)
        i, j = newton.row, newton.col
        self.pos = base[i] + local[i] * bsz[i] + local[j]
        self.newton, self.n = newton, local.size

    def solve(self, w, rhs):
        from .direction import solve_blocks
        flat = np.zeros(self.size)
        flat[self.pos] = self.newton.values(w)
        return solve_blocks(self.groups, flat, rhs, self.n)


class _RowProducts:
    """``G v`` and ``G^T u`` for a CSR ``G`` by ``np.bincount`` over its entries: the products of scipy's CSR
    routines summed in the same order (each row's, resp. each column's, terms in storage order from 0), so the
    same values, without scipy's per-call checks (about 8 us a product against 2-3; the centring makes six
    per Newton step)."""

    def __init__(self, G):
        self.rows, self.n = G.shape
        self.rid = np.repeat(np.arange(self.rows), np.diff(G.indptr))
        self.idx, self.data = G.indices, G.data

    def dot(self, v):
        return np.bincount(self.rid, weights=self.data * v[self.idx], minlength=self.rows)

    def tdot(self, u):
        return np.bincount(self.idx, weights=self.data * u[self.rid], minlength=self.n)


def centre(x, G, h, iters=30, layout=None):
    """Damped Newton on ``-sum log(h - Gx) + ||x - x_lp||^2 / 2`` from a strictly feasible x
    (sparse products, :class:`_RowProducts`; the n x n Newton matrix, :class:`_NewtonMatrix`, is solved block
    by block when its blocks (``layout``: :meth:`.ConstraintSet.blocks`, found from ``G`` when not given)
    have at most ``MAX_BLOCK`` variables (:class:`_BlockNewton`), else factorised sparse when at most 5 % of
    it is nonzero, dense otherwise, so this runs only for small n)."""
    from .constraints import block_layout, row_components
    from .direction import MAX_BLOCK
    x_lp = x.copy()
    G = sp.csr_matrix(G)
    prod = _RowProducts(G)
    newton = _NewtonMatrix(G)
    if layout is None:
        ncomp, lab = row_components(G, G.shape[1])
        layout = block_layout(lab, np.bincount(lab, minlength=ncomp))
    small = max((sz for sz, _, _ in layout[0]), default=0) <= MAX_BLOCK
    blocks = _BlockNewton(newton, layout) if small else None

    def phi(xv, sv):
        return -np.sum(np.log(sv)) + 0.5 * np.sum((xv - x_lp) ** 2)

    s = h - prod.dot(x)
    f0 = None
    for _ in range(iters):
        # s and f0: the slacks and phi of the point accepted last (the same arrays, the same values)
        grad = prod.tdot(1.0 / s) + (x - x_lp)
        if blocks is not None:
            dx = -blocks.solve(1.0 / s ** 2, grad)
        else:
            H = newton.csc(1.0 / s ** 2)
            if H.nnz <= 0.05 * x.size ** 2:  # sparse LU
                dx = -spla.spsolve(H, grad, permc_spec="MMD_AT_PLUS_A")   # H symmetric (see direction.py)
            else:
                dx = -np.linalg.solve(H.toarray(), grad)
        dec = float(-grad @ dx)
        if dec < 1e-10:
            break
        Gdx = prod.dot(dx)
        pos = Gdx > 0
        a = min(1.0, 0.95 * float(np.min(s[pos] / Gdx[pos]))) if np.any(pos) else 1.0
        if f0 is None:
            f0 = phi(x, s)
        while a > 1e-12:
            xn = x + a * dx
            sn = h - prod.dot(xn)
            if np.all(sn > 0):
                fn = phi(xn, sn)
                if fn <= f0 - 0.25 * a * dec:
                    x, s, f0 = xn, sn, fn
                    break
            a *= 0.5
        else:
            break
    return x


def phase1_nonlinear(cons, x):
    from scipy.optimize import minimize

    G, h = _linear_rows(cons)
    Gd = G.toarray()
    sc = [max(1.0, float(np.linalg.norm(body.gradient(x)))) for _, body, _ in cons.nonlinear]

    def nl(xt):
        return np.array([(hi - body.value(xt[:-1])) / s - xt[-1] for (_, body, hi), s in zip(cons.nonlinear, sc)])

    def nl_jac(xt):
        J = np.vstack([-body.gradient(xt[:-1]) / s for (_, body, _), s in zip(cons.nonlinear, sc)])
        return np.hstack([J, -np.ones((J.shape[0], 1))])

    cons_list = [{"type": "ineq", "fun": nl, "jac": nl_jac}]
    if Gd.shape[0]:
        cons_list.append({"type": "ineq", "fun": lambda xt: h - Gd @ xt[:-1] - xt[-1],
                          "jac": lambda xt: np.hstack([-Gd, -np.ones((Gd.shape[0], 1))])})
    t0 = min(0.0, float(np.min(nl(np.append(x, 0.0)))))
    xt0 = np.append(x, t0 - 1.0)
    res = minimize(lambda xt: -xt[-1], xt0, jac=lambda xt: np.append(np.zeros(x.size), -1.0),
                   constraints=cons_list, bounds=[(None, None)] * x.size + [(None, 1.0)], method="SLSQP",
                   options={"maxiter": 500, "ftol": 1e-12})
    xn = res.x[:-1]
    return xn


def strictly_feasible_start(cons, program, x0=None):
    """Return a strictly feasible x (see module docstring); raise when there is none."""
    n = cons.n
    if x0 is not None:
        x0 = np.asarray(x0, dtype=float).ravel()
        if x0.size != n:
            raise InputDataError(f"x0 has length {x0.size}, the program has {n} variables")
        if not np.all(np.isfinite(x0)):
            raise InputDataError("x0 contains NaN or inf")
        s = cons.slack(x0)
        if not cons.interior(x0, s):
            k = int(np.argmin(s))
            raise InputDataError(f"x0 is not strictly feasible: {cons.names[k]} has slack {s[k]:.3g} (needs c(x0) < 0 "
                                 "beyond rounding)")
        return x0
    px = program.x0
    if px is not None and np.all(np.isfinite(px)):
        s = cons.slack(px)
        if cons.interior(px, s) and (not s.size or np.all(s > 1e-12)):
            return px.copy()
    if cons.n_lin == 0:
        x = bounds_interior(program.lb, program.ub)
    else:
        pairs = mirror_pairs(cons) if n <= 1000 else None
        if pairs is not None:
            # loosened_interior's point without its search: every variable is free (0), each u_j one from its
            # rows' boundary (slack 0 at x = 0: u_j = 1); then its centre in closed form (u_j = 2)
            x = np.zeros(n)
            x[pairs[1]] = 1.0
            x = _pair_centre(x, pairs[1])
            if not cons.interior(x, cons.slack(x)):  # a row inside its rounding margin (|c| << |p|)
                pairs = None
        if pairs is None:
            x = loosened_interior(cons, program.lb, program.ub)
            if x is None:
                x, G, h = phase1_linear(cons, program.names)
            else:
                G, h = _linear_rows(cons)
            if n <= 1000:
                x = centre(x, G, h, layout=cons.blocks())
    if cons.n_nl:
        s = cons.slack(x)
        if not cons.interior(x, s):
            x = phase1_nonlinear(cons, x)
            s = cons.slack(x)
            if not cons.interior(x, s):
                k = int(np.argmin(s))
                raise ModelStructureError(
                    f"could not find a strictly feasible point: {cons.names[k]} has slack {s[k]:.3g}; "
                    "the constraints may have no strict interior (ipsa needs c(x) < 0 somewhere) -- or pass x0")
    return x
