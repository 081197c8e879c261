"""Is the infimum attained? A recession-direction LP for sums of log-sum-exp terms of affine maps.

A convex objective of the form of :mod:`.model` (no latent terms)

    f(theta) = k + c^T theta + 1/2 theta^T H theta + sum_g c_g log sum_{k in g} exp(A_k theta + b_k),  c_g > 0,

over ``Lambda = {lo <= A_c theta <= hi, lb <= theta <= ub}`` has along a direction ``v`` with ``H v = 0`` and
``v`` in the recession cone of ``Lambda`` (``a_i^T v >= 0`` for a finite ``lo_i``, ``<= 0`` for a finite ``hi_i``,
the same for the bounds) the slope at infinity (the recession function, Rockafellar 1970, section 8)

    f_inf(v) = c^T v + sum_g c_g max_{k in g: b_k > -inf} A_k v,

and ``f(theta + t v) - f(theta) = t f_inf(v) + sum_g c_g [log sum_k exp(s_k + t (A_k v - M_g)) - log sum_k exp(s_k)]``
(``s_k = A_k theta + b_k``, ``M_g = max_k A_k v``), which decreases strictly in ``t`` from *every* ``theta`` when
``f_inf(v) <= 0`` and some group has a configuration with ``A_k v < M_g`` (its weight decays; every weight is
positive). Then no point is a
minimizer: ``f(theta + v) < f(theta)`` for all feasible ``theta`` (Rockafellar 1970, Theorem 27.1: the infimum of a
closed proper convex function is attained when every direction of recession is one of constancy; here the converse
holds too). ``f_inf(v) < 0`` is the stronger case: ``f`` is unbounded below. Binary logistic regression without a
penalty on linearly separable data is the classic instance (Albert and Anderson 1984: the maximum likelihood estimate
does not exist under complete or quasi-complete separation, exactly when such a ``v`` exists).

The search is one LP over the directions that no curvature pins (``H_jj = 0`` columns when ``H`` is diagonal, else
``H v = 0`` as rows) and no pair of finite bounds fixes, in the box ``|v_j| <= 1``, with one variable ``m_g`` per
group:

    max  sum_k c_g(k) (m_g(k) - A_k v) + r      s.t.  A_k v <= m_g(k),   r = -(c^T v + sum_g c_g m_g) >= 0,
                                                      v in the recession cone of Lambda,

solved by HiGHS through :mod:`varopt.lpqp`. Its answer ``v`` is then checked in floating point on the objective's own
arrays (``f_inf(v)`` and the strict decrease recomputed from ``A v``), so the verdict never rests on the LP's
tolerances alone: a direction counts only when its strict decrease exceeds ``STRICT_TOL`` and its slope ``f_inf(v)``
is below ``FLAT_TOL`` (both relative to the largest value the terms can take in the box).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: smallest strict decrease ``sum_g c_g sum_k (max_g - A_k v)``, relative to ``scale`` (the sum of the terms'
#: largest magnitudes in the box), that counts as a direction (a non-separable set's LP answer is 0 to ~1e-9)
STRICT_TOL = 1e-6
#: largest slope at infinity ``f_inf(v)``, relative to ``scale``, that counts as flat (LP rows hold to 1e-9)
FLAT_TOL = 1e-8
#: ... and below ``-UNBOUNDED_TOL * scale`` the objective decreases linearly along ``v``: unbounded below
UNBOUNDED_TOL = 1e-6
#: HiGHS tolerances of the direction LP (tighter than its defaults 1e-7: the check above is at 1e-8 relative)
LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


class Recession:
    """The outcome of :func:`recession_direction`: ``kind`` is ``'unbounded'`` (``f_inf(v) < 0``) or
    ``'not_attained'`` (``f_inf(v) = 0`` and a strict decrease); ``v`` the direction (length ``n``, ``max |v_j| = 1``),
    ``slope`` ``f_inf(v)``, ``decrease`` the strict decrease measure, ``groups`` how many groups strictly decrease
    along ``v`` (separable data: the samples with a positive margin)."""

    def __init__(self, kind, v, slope, decrease, groups):
        self.kind, self.v, self.slope, self.decrease, self.groups = kind, v, slope, decrease, groups
        self.source = None   # 'iterate' (the solver's own direction passed the exact test) or 'LP'

    def describe(self, names=None, top=3):
        """A sentence for the solver's message: the direction's largest entries by name."""
        idx = np.argsort(-np.abs(self.v))[:top]
        idx = [int(j) for j in idx if self.v[j] != 0]
        nm = (lambda j: names[j]) if names is not None and len(names) == self.v.size else (lambda j: f"x[{j}]")
        dirn = ", ".join(f"{nm(j)} {self.v[j]:+.3g}" for j in idx)
        return f"a direction v ({dirn}{', ...' if np.count_nonzero(self.v) > len(idx) else ''})"


def recession_direction(model, lp=None, x=None):
    """A direction along which the convex compiled ``model`` (:class:`.model.MajorizeModel`) strictly decreases
    from every feasible point (:class:`Recession`), or None when there is none (the LP's optimum is 0 to its
    tolerance, or the model has no partition function or no direction free of curvature). ``x``: the solver's last
    iterate; its own direction (on the free columns) is tried first, exactly, without the LP -- for separable data
    the iterates of a descent method grow along a separating direction (Soudry et al. 2018), so it usually passes.
    ``lp``: the LP layer (:mod:`varopt.lpqp`; a test may pass another)."""
    if not model.convex or model.pos is None:
        return None
    if lp is None:
        from ... import lpqp as lp
    n = model.n
    vlo = np.where(np.isfinite(model.lb), 0.0, -1.0)
    vhi = np.where(np.isfinite(model.ub), 0.0, 1.0)
    Hrows = None
    if model.H_diagonal:
        pinned = model.Hd > 0
        vlo[pinned] = 0.0
        vhi[pinned] = 0.0
    free = np.flatnonzero(vlo < vhi)
    if free.size == 0:
        return None  # every direction has curvature or is fixed by bounds: level sets bounded, minimum attained
    if not model.H_diagonal:
        HF = sp.csr_matrix(model.H)[:, free]
        nz = np.flatnonzero(np.diff(HF.indptr))
        Hrows = HF[nz] if nz.size else None
    A, b, seg, coef = model.pos
    A = sp.csr_matrix(A)
    keep = np.isfinite(b)           # a configuration with log base measure -inf does not exist
    AF = A[keep][:, free].tocsr()
    sk = np.asarray(seg)[keep]
    order = np.argsort(sk, kind="stable") if not (np.diff(sk) >= 0).all() else None
    if order is not None:           # (merged groups come sorted by id; kept safe)
        AF, sk = AF[order], sk[order]
    _, gk = np.unique(sk, return_inverse=True)
    G = int(gk.max()) + 1
    cg = np.asarray(coef, dtype=float)[np.unique(sk)]
    K = AF.shape[0]
    nf = free.size
    cF = np.asarray(model.c, dtype=float)[free]
    per_row = cg[gk]
    starts = np.flatnonzero(np.concatenate(([True], gk[1:] != gk[:-1])))
    # the largest value the terms can take in the box |v_j| <= 1: the tolerances are relative to it
    scale = max(float(np.abs(cF).sum() + np.asarray(abs(AF).sum(axis=1)).ravel() @ per_row), 1e-300)
    Ac, clo, chi = _constraint_recession(model, free)

    def verdict(vF):
        """The exact verdict on ``vF`` (free columns), on the objective's own arrays (not the LP's rows)."""
        mx = float(np.abs(vF).max(initial=0.0))
        if not mx > 0 or not np.isfinite(mx):
            return None
        vF = vF / mx
        if ((vF < vlo[free]) | (vF > vhi[free])).any():
            return None
        if not _feasible_direction(model, free, vF, Ac, clo, chi, Hrows):
            return None
        z = AF @ vF
        mg = np.maximum.reduceat(z, starts)
        gap = mg[gk] - z
        slope = float(cF @ vF + cg @ mg)
        per_group = np.bincount(gk, weights=gap, minlength=G)
        decrease = float(cg @ per_group)
        v = np.zeros(n)
        v[free] = vF
        if slope < -UNBOUNDED_TOL * scale:
            return Recession("unbounded", v, slope, decrease, int((per_group > 0).sum()))
        if decrease > STRICT_TOL * scale and slope <= FLAT_TOL * scale:
            strict = int(np.count_nonzero(per_group > STRICT_TOL * scale / max(G, 1)))
            return Recession("not_attained", v, slope, decrease, strict)
        return None

    if x is not None:
        rec = verdict(np.asarray(x, dtype=float)[free])
        if rec is not None:
            rec.source = "iterate"
            return rec
    # objective (minimised): -(sum_k c_g (m_g - A_k v) + r) with r = -(c^T v + sum_g c_g m_g)
    Jg = np.bincount(gk, minlength=G).astype(float)
    obj_v = np.asarray(AF.T @ per_row).ravel() + cF
    obj_m = -(cg * Jg - cg)
    cost = np.concatenate([obj_v, obj_m])
    E = sp.csr_matrix((-np.ones(K), (np.arange(K), gk)), shape=(K, G))
    blocks = [sp.hstack([AF, E])]
    lo = [np.full(K, -np.inf)]
    hi = [np.zeros(K)]
    blocks.append(sp.csr_matrix(np.concatenate([cF, cg])[None, :]))   # f_inf(v) <= 0 (r >= 0)
    lo.append(np.array([-np.inf]))
    hi.append(np.zeros(1))
    if Hrows is not None:                                              # H v = 0
        blocks.append(sp.hstack([Hrows, sp.csr_matrix((Hrows.shape[0], G))]))
        lo.append(np.zeros(Hrows.shape[0]))
        hi.append(np.zeros(Hrows.shape[0]))
    if Ac is not None:
        blocks.append(sp.hstack([Ac, sp.csr_matrix((Ac.shape[0], G))]))
        lo.append(clo)
        hi.append(chi)
    M = sp.vstack(blocks).tocsr()
    res = lp.solve_lp(cost, M, np.concatenate(lo), np.concatenate(hi),
                      np.concatenate([vlo[free], np.full(G, -np.inf)]),
                      np.concatenate([vhi[free], np.full(G, np.inf)]), options=LP_OPTIONS)
    if res.status != "optimal" or res.x is None:
        return None
    rec = verdict(np.clip(np.asarray(res.x[:nf], dtype=float), vlo[free], vhi[free]))
    if rec is not None:
        rec.source = "LP"
    return rec


def _constraint_recession(model, free):
    """Rows of the recession cone of the linear constraints on the free columns: ``a_i^T v >= 0`` for a finite
    lower side, ``<= 0`` for a finite upper side (both: ``= 0``); None when there are none."""
    A = model.A
    if A is None or A.shape[0] == 0:
        return None, None, None
    lo = np.where(np.isfinite(model.lo), 0.0, -np.inf)
    hi = np.where(np.isfinite(model.hi), 0.0, np.inf)
    rows = np.flatnonzero(np.isfinite(lo) | np.isfinite(hi))
    if rows.size == 0:
        return None, None, None
    Ac = sp.csr_matrix(A)[rows][:, free]
    return Ac, lo[rows], hi[rows]


def _feasible_direction(model, free, vF, Ac, clo, chi, Hrows):
    """``v`` stays in the recession cone of the constraints and the null space of ``H`` to rounding (the bounds are
    the LP's column bounds, kept exactly by the simplex)."""
    tol = 1e-9
    if Ac is not None:
        a = Ac @ vF
        s = np.asarray(abs(Ac).sum(axis=1)).ravel() + 1.0
        if (a < clo - tol * s).any() or (a > chi + tol * s).any():
            return False
    if Hrows is not None:
        h = Hrows @ vF
        s = np.asarray(abs(Hrows).sum(axis=1)).ravel() + 1.0
        if (np.abs(h) > tol * s).any():
            return False
    return True


def program_recession(program, x=None, smooth=None, pen=None):
    """:func:`recession_direction` of a compiled program as ``proxsg`` reads it (smooth log-sum-exp part plus L1 /
    ridge penalties and bounds): the L1 sums lifted to linear rows on new columns ``s >= |e|`` (exact for the
    recession cone: ``lam * sum s`` grows along any direction that moves ``e``), then the model of
    :mod:`.model`; None when the program is not of that form (the check does not apply) or has no such direction.
    The direction is returned on the program's own columns. With the solver's point ``x``, its smooth part and
    penalty (:func:`varopt.solvers.proxsg.penalty.split_objective`), :func:`attained_certificate` is tried first."""
    from ...errors import InputDataError, ModelStructureError
    from ...program.abs_lift import lift_abs_sums
    from .model import MajorizeModel
    if x is not None and smooth is not None and pen is not None and _proxsg_certificate(x, smooth, pen):
        return None
    try:
        prog = program.split_abs_rows()
        lift = lift_abs_sums(prog, objective=True)
        if lift is not None:
            prog = lift.program
        model = MajorizeModel(prog)
    except (ModelStructureError, InputDataError, ValueError):
        return None
    xl = None
    if x is not None:
        xl = lift.extend(np.asarray(x, dtype=float)) if lift is not None else np.asarray(x, dtype=float)
    rec = recession_direction(model, x=xl)
    if rec is not None:
        rec.v = rec.v[:program.n]
    return rec


def checked_outcome(check, x, names, f, status, message):
    """The attainment check shared by majorize and proxsg: ``check(x)`` (a :class:`Recession` or None), timed, and
    what it makes of a run that ended with ``status``/``message`` at ``x`` with objective ``f``:
    ``(status, message, info)``. A ray of linear decrease is ``unbounded``; a finite infimum not attained turns the
    status into ``numerical`` (the last iterate is the output, docs/conventions.md) except at an iteration limit,
    whose message gets the reason; ``info`` is ``result.info['attainment']`` (verdict, cost, direction)."""
    import time

    t0 = time.perf_counter()
    rec = check(x)
    info = {"seconds": time.perf_counter() - t0, "verdict": "attained" if rec is None else rec.kind}
    if rec is None:
        return status, message, info
    info.update(direction=rec.v, slope=rec.slope, strict_groups=rec.groups, found_by=rec.source)
    if rec.kind == "unbounded":
        return "unbounded", (f"the objective is unbounded below: along {rec.describe(names)} (a recession direction "
                             f"of the constraints on which no quadratic term curves) its slope at infinity is "
                             f"{rec.slope:.3g} < 0"), info
    note = not_attained_message(rec, names, f, float(np.linalg.norm(x)))
    if status == "iteration_limit":
        return status, f"{message}; {note}", info
    return "numerical", note, info


def not_attained_message(rec, names, f, xnorm):
    """The solver message of a finite infimum that is not attained (status ``numerical``)."""
    return (f"the infimum is not attained (no minimizer exists): along {rec.describe(names)} every log-sum-exp term "
            f"is non-increasing and {rec.groups} strictly decrease, from every feasible point, while no quadratic "
            "term, penalty or constraint stops it (e.g. separable classes in a logistic regression without "
            f"penalty); the last iterate is returned (objective {f:.6g}, ||x|| = {xnorm:.3g}); add a penalty such "
            "as a ridge or L1 term (C < inf in the estimators) or bounds")


#: largest number of unpenalized free columns for which :func:`attained_certificate` forms their Hessian
CERTIFICATE_MAX_COLS = 2000
#: ... and largest rows x columns^2 of that product (digits without penalty, 17970 x 650^2, is left to the other tests)
CERTIFICATE_MAX_WORK = 4e8


def _dense_columns(A, cols):
    """``A[:, cols]`` as a dense array, from the CSR arrays directly (scipy's column fancy-indexing costs ~100 us
    per call on the few-hundred-row matrices of small fits, more than the rest of the certificate)."""
    if not sp.issparse(A):
        return np.asarray(A, dtype=float)[:, cols]
    A = sp.csr_matrix(A)
    pos = np.full(A.shape[1], -1)
    pos[cols] = np.arange(len(cols))
    p = pos[A.indices]
    hit = p >= 0
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    out = np.zeros((A.shape[0], len(cols)))
    np.add.at(out, (rows[hit], p[hit]), A.data[hit])
    return out


def class_intercepts_attained(AU, b, size, coef, cU):
    """True when the free columns are class intercepts and every class has positive weight in the linear term: then
    the minimum is attained (the conclusion of :func:`attained_certificate`, here in O(K m) without the weights at
    the solver's point and without dense algebra; wine: ~0.25 ms less per solve). ``AU`` (K x m, dense): the free
    columns of the features, rows in group order; ``size``: every group's number of rows (the groups are equal);
    ``coef``: the groups' coefficients; ``cU``: the linear coefficients of the free columns.

    The case: every group's rows restricted to the free columns form a permutation matrix (configuration ``k`` of
    group ``g`` holds a 1 in intercept column ``pi_g(k)`` and nothing else: multinomial logistic regression's
    intercepts). Then ``max_k A_k v = max_j v_j`` in every group, so with ``C = sum_g coef_g`` and ``q = -cU / C``
    the slope at infinity of the module docstring is ``f_inf(v) = cU^T v + C max_j v_j = C (max_j v_j - q^T v)``.
    When ``q > 0`` and ``sum_j q_j = 1`` (a point of the open simplex: the class frequencies), ``f_inf(v) >= 0`` with
    equality only for constant ``v``, along which every configuration of every group moves alike (a direction of
    constancy, no strict decrease): no direction of strict decrease and no unbounded ray. False when the structure
    differs or ``q`` is not such a point to rounding (a class without samples: its intercept decreases without
    bound; the general tests then decide)."""
    K, m = AU.shape
    if m != size or K % size or not np.isfinite(b).all():
        return False
    P = AU.reshape(K // size, size, m)
    # entries 0 or 1, one 1 per row (a configuration's one intercept) and per column within each group
    if not (((P == 0) | (P == 1)).all() and (P.sum(axis=2) == 1).all() and (P.sum(axis=1) == 1).all()):
        return False
    C = float(np.sum(coef))
    q = -np.asarray(cU, dtype=float) / C
    return bool(C > 0 and q.min() > 1e-12 and abs(q.sum() - 1.0) <= 1e-12 * m)


def one_column_attained(A, b, seg, coef, c, j, col=None):
    """True when neither ``v = e_j`` nor ``v = -e_j`` is a direction of strict decrease (the only directions when
    ``j`` is the one column no curvature pins, e.g. an unpenalized intercept next to a ridge): then the minimum is
    attained (:func:`attained_certificate`'s conclusion, in O(nnz of the column) instead of its dense algebra; on the
    small sets of ``benchmarks/majorize_constrained.py`` 0.45-1.1 ms became tens of microseconds). False when one of
    them may be (the caller then runs the full check). ``f_inf(v) = c^T v + sum_g coef_g max_k A_k v`` and the strict
    decrease ``sum_g coef_g sum_k (max_g - A_k v)`` of the module docstring, with a margin of 1e-9 of the terms'
    scale. ``col``: the column ``A[:, j]`` as a dense array when the caller holds it (else read from ``A``)."""
    col = _dense_columns(A, np.array([j]))[:, 0] if col is None else np.asarray(col, dtype=float)
    seg = np.asarray(seg)
    keep = np.isfinite(b)
    if not keep.all():   # rows with h = 0 (offset -inf) are no configuration; without them no gather (no copies)
        col, seg = col[keep], seg[keep]
    if seg.size == 0 or not (seg[1:] >= seg[:-1]).all():
        return False
    starts = np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))
    coef_g = np.asarray(coef, dtype=float)[seg[starts]]
    counts = np.empty(starts.size, dtype=starts.dtype)
    counts[:-1] = starts[1:] - starts[:-1]
    counts[-1] = seg.size - starts[-1]
    cj = float(np.asarray(c, dtype=float)[j])
    # both signs from one pass each of max, min and sum over the groups, with the same doubles as reducing
    # z = +-col: max(-col) = -min(col), sum(-col) = -sum(col) and max |col| = max(max col, -min col) exactly
    mx = np.maximum.reduceat(col, starts)
    mn = np.minimum.reduceat(col, starts)
    tot = np.add.reduceat(col, starts)
    scale = abs(cj) + float(coef_g @ np.maximum(mx, -mn)) + 1e-300
    for sgn, mg, zsum in ((1.0, mx, tot), (-1.0, -mn, -tot)):
        slope = sgn * cj + float(coef_g @ mg)
        gap = float(coef_g @ (mg * counts - zsum))
        if slope < 1e-9 * scale or (slope <= 1e-9 * scale and gap > 0):
            return False
    return True


def attained_certificate(A, b, seg, coef, c, x, pinned, l1=None, center=None, dense=None):
    """True when the weights at ``x`` prove that no direction of strict decrease exists, so the LP of
    :func:`recession_direction` is not needed (the common case: a minimizer exists and ``x`` is near it).

    Dual certificate (Gordan's alternative): if strictly positive weights ``p'_k`` (summing to 1 in each group) and
    ``|u_j| <= l1_j`` satisfy ``c_J + sum_k c_g(k) p'_k A_kJ + u_J = 0`` on the columns ``J`` that no curvature pins,
    then for every direction ``v`` on ``J``: ``f_inf(v) = c^T v + sum_g c_g max_k A_k v + sum_j l1_j |v_j|
    >= (c + sum_k c_g p'_k A_k + u)^T v = 0``, with equality only where every group is flat along ``v`` (``p' > 0``):
    no strict decrease, no unbounded ray. The softmax weights ``p`` at ``x`` are positive and nearly satisfy it (the
    gradient is small); the correction ``p' = p (1 + (A_kU - abar_g) y)`` with ``y`` the Newton step
    ``H_UU y = -g_U`` on the unpenalized columns ``U`` (in the complement of the directions of constancy) keeps the group sums, zeroes ``g_U`` exactly, and stays
    positive when ``max |(A_kU - abar_g) y| <= 1/2``; the L1 columns then need ``|g_j'| <= l1_j``. L1 columns away
    from their kink (``x_j != center_j``) join ``U`` with the target ``g_j' = -l1_j sign(x_j - center_j)`` (the
    solver's answer meets it only to its tolerance). ``pinned``: columns
    fixed by curvature (a positive diagonal quadratic) or bounds; the caller leaves out models with other
    constraints (their cone needs the LP). False when the test does not pass (separable data: ``H_UU`` nearly
    singular, ``y`` huge) or cannot be formed; the LP then decides. ``dense``: ``A`` as a dense array when the
    caller holds one (the columns ``A[:, U]`` are then a slice instead of a pass over the CSR arrays)."""
    n = x.size
    l1 = np.zeros(n) if l1 is None else np.asarray(l1, dtype=float)
    J = ~np.asarray(pinned, dtype=bool)
    off = (x != (np.zeros(n) if center is None else np.asarray(center, dtype=float))) & (l1 > 0)
    U = np.flatnonzero(J & ((l1 == 0) | off))
    L = np.flatnonzero(J & (l1 > 0) & ~off)
    target = -(l1 * np.sign(x - (0.0 if center is None else np.asarray(center, dtype=float))))[U]
    if U.size > CERTIFICATE_MAX_COLS or A.shape[0] * float(U.size) ** 2 > CERTIFICATE_MAX_WORK:
        return False
    A = A if sp.isspmatrix_csr(A) else sp.csr_matrix(A)   # (a CSR copy's format checks cost ~13 us)
    keep = np.isfinite(b)
    if not keep.all():
        A, b, seg = A[keep], b[keep], np.asarray(seg)[keep]
        dense = None if dense is None else dense[keep]
    seg = np.asarray(seg)
    if seg.size == 0 or not (np.diff(seg) >= 0).all():
        return False
    starts = np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))
    gid = np.cumsum(np.concatenate(([0], (seg[1:] != seg[:-1]).astype(np.int64))))
    coef_g = np.asarray(coef, dtype=float)[seg[starts]]
    with np.errstate(all="ignore"):
        s = A @ x + b
        mx = np.maximum.reduceat(s, starts)
        e = np.exp(s - mx[gid])
        p = e / np.add.reduceat(e, starts)[gid]
    if not (np.isfinite(p).all() and (p > 0).all()):
        return False
    w = coef_g[gid] * p
    c = np.asarray(c, dtype=float)
    t = np.zeros(p.size)
    if U.size:
        AU = _dense_columns(A, U) if dense is None else dense[:, U]
        abar = np.add.reduceat(p[:, None] * AU, starts, axis=0)
        D = AU - abar[gid]
        gU = c[U] + AU.T @ w - target
        R = np.sqrt(w)[:, None] * D
        Hm = R.T @ R
        # directions of constancy (a multinomial's common intercept shift: every configuration of every group moves
        # alike) make H_UU singular for every x; they are the null space of the within-group differences, a property
        # of the features, so y is sought in its complement Q, by Cholesky without truncation. (A truncated solve,
        # lstsq with rcond, dropped the near-null direction of a quasi-separated set -- hepatitis -- and "proved" a
        # minimum the LP refutes: near-singular there is the answer, not noise.)
        first = np.zeros(AU.shape[0], dtype=bool)
        first[starts] = True
        Dl = AU[~first] - AU[starts[gid[~first]]]
        ev, Q = np.linalg.eigh(Dl.T @ Dl)
        Q = Q[:, ev > 1e-12 * max(float(ev.max(initial=0.0)), 1e-300)]
        try:
            Lc = np.linalg.cholesky(Q.T @ Hm @ Q)
        except np.linalg.LinAlgError:
            return False
        y = -Q @ np.linalg.solve(Lc.T, np.linalg.solve(Lc, Q.T @ gU))
        if not np.isfinite(y).all():
            return False
        t = D @ y
        if np.abs(t).max(initial=0.0) > 0.5:
            return False
        resid = gU + AU.T @ (w * t)
        mag = np.abs(c[U]) + np.abs(AU).T @ w + np.abs(target)
        if (np.abs(resid) > 1e-8 * mag + 1e-300).any():
            return False
    if L.size:
        AL = A[:, L]
        gL = c[L] + AL.T @ (w * (1.0 + t))
        mag = np.abs(c[L]) + abs(AL).T @ w
        if (np.abs(gL) > l1[L] * (1 + 1e-9) + 1e-10 * mag).any():
            return False
    return True


def _proxsg_certificate(x, smooth, pen):
    """:func:`attained_certificate` on ``proxsg``'s split (smooth part ``smooth``, separable penalty ``pen``): only
    when every log-sum-exp enters with a positive coefficient, the quadratic part is diagonal and no column free of
    curvature has exactly one finite bound (its cone would need a sign-constrained multiplier: the LP decides)."""
    from ...program.expression import Expression
    from .model import MajorizeModel
    if not smooth.lse or any((g.coef <= 0).any() or (g.mult >= 0).any() for g in smooth.lse):
        return False
    try:
        H, c, _ = Expression(smooth.n, smooth.constant, smooth.linear, smooth.quadratic,
                             atoms=list(smooth.atoms)).as_quadratic()
    except ValueError:
        return False   # other smooth atoms (exp, ...): the LP's model refuses them too
    H = sp.csr_matrix(H)
    d = H.diagonal()
    if (H - sp.diags(d)).count_nonzero():
        return False
    lb, ub = pen.lb, pen.ub
    pinned = (d > 0) | (pen.l2 > 0) | (np.isfinite(lb) & np.isfinite(ub))
    if ((np.isfinite(lb) | np.isfinite(ub)) & ~pinned).any():
        return False
    A, b, seg, coef = MajorizeModel._merge([(g, None) for g in smooth.lse])
    return attained_certificate(A, b, seg, coef, np.asarray(c, dtype=float).ravel(), np.asarray(x, dtype=float),
                                pinned, pen.l1, pen.center)
