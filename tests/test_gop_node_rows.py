"""The relaxed-dual LP reuses the previous node's rows (``RDModel._set_node_rows``): after every node set-up the
LP, read back from HiGHS, must hold exactly the base rows followed by the node's rows and bounds, and the solves
must still certify the known optima. The node rows use node columns ``s_j = sigma_j g_j(y) >= 0`` for the
qualifying constraints (docs/gop.md §7, "node columns"): with ``s`` eliminated they must be the rows of docs/gop.md
§5/§6b written out term by term, and the LP values must be those of that LP."""
import numpy as np
import pyomo.environ as pyo
import pytest
from gop_rd_models import MODELS

import varopt  # noqa: F401
from varopt.solvers.gop import relaxed_dual as RD
from varopt.solvers.gop.search import TINY_BOX_TERM


def _dense(A):
    """Node rows as a dense array (they are dense while small, CSR beyond: ``relaxed_dual.dense_rows``)."""
    return A.toarray() if hasattr(A, "toarray") else np.asarray(A)


def _same_as_full(search, rows, path, blo, bub):
    """``rows`` (the incremental node rows) equal the full build's bit for bit; returns them."""
    M, lo, hi = rows
    Mf, lof, hif = search._node_rows_full(path, blo, bub)
    assert type(M) is type(Mf)
    np.testing.assert_array_equal(_dense(M), _dense(Mf))
    np.testing.assert_array_equal(lo, lof)
    np.testing.assert_array_equal(hi, hif)
    return M, lo, hi


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("name", ["bgmm_point", "bgmm_gaussian", "bilinear"])
def test_node_rows_in_the_lp_are_the_requested_ones(name, dense, monkeypatch):
    # the rows of every node dense, or CSR (as at depth, relaxed_dual.dense_rows)
    monkeypatch.setattr(RD, "DENSE_NODE_ENTRIES", 10 ** 12 if dense else 0)
    model = MODELS[name]()
    seen = {"in_place": 0, "checked": 0}
    orig = RD.RDModel._set_node_rows

    def checked(self, A, lo, hi):
        in_place = self.node_rows is not None and self.node_rows[0].shape == A.shape
        orig(self, A, lo, hi)
        d = self.hm.data()                   # what HiGHS holds, read back
        k, w = A.shape
        assert d["A"].shape[0] == self.m_base + k and d["A"].shape[1] >= w
        assert hasattr(A, "toarray") != dense
        want = _dense(A).copy()
        want[np.abs(want) <= 1e-9] = 0.0       # HiGHS drops entries below its small_matrix_value (1e-9)
        got = d["A"][self.m_base:].toarray()
        np.testing.assert_array_equal(got[:, :w], want)
        assert not np.any(got[:, w:]) and not d["A"][:, w:].nnz   # node columns the node does not use: empty
        # node columns: cost 0, bounds [0, inf)
        assert not np.any(d["c"][self.ncol:]) and not np.any(d["lb"][self.ncol:]) and np.all(d["ub"][self.ncol:] == np.inf)
        np.testing.assert_array_equal(d["row_lo"][self.m_base:], np.maximum(lo, -np.inf))
        np.testing.assert_array_equal(d["row_hi"][self.m_base:], hi)
        seen["in_place"] += in_place
        seen["checked"] += 1

    monkeypatch.setattr(RD.RDModel, "_set_node_rows", checked)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    r = res.varopt_result
    assert r.status == "optimal", r.message
    assert seen["checked"] > 10 and seen["in_place"] > 0, seen


def _reference_node_rows(self, path, blo, bub):
    """The node rows written out term by term, one split variable at a time (docs/gop.md §5, §6b): the oracle of
    the vectorised ``GopSearch._node_rows``."""
    ny, ncol, tcol, split = self.bm.ny, self.ncol, self.tcol, self.split.tolist()
    rows = []
    for k, B in path:
        L = self.lags[k]
        conn = L["conn"]
        D = np.array([bub[i] if b else blo[i] for i, b in zip(conn.tolist(), B)]) - L["xkc"]
        for j, b in enumerate(B):
            # a box term sigma_j D_j s_j below TINY_BOX_TERM in magnitude is rounded down (HiGHS would drop it)
            sigma = -1.0 if b else 1.0
            if 0 < sigma * D[j] < TINY_BOX_TERM:
                D[j] = 0.0
            elif -TINY_BOX_TERM < sigma * D[j] < 0:
                D[j] = -TINY_BOX_TERM / sigma
        use = L["rest"] if L["split"] else np.ones(conn.size, dtype=bool)
        cst = L["const"] + sum(D[j] * L["g0c"][j] for j in np.flatnonzero(use))
        a = L["a"] + sum((D[j] * L["G1c"][j] for j in np.flatnonzero(use)), np.zeros(ny))
        row = np.zeros(ncol)
        if L["feas"]:
            row[:ny] = a
            rows.append((row, -np.inf, -cst))
        else:
            row[:ny], row[tcol] = -a, 1.0
            rows.append((row, cst, np.inf))
        for j, b in enumerate(B):
            row = np.zeros(ncol)
            row[:ny] = L["G1c"][j]
            g0 = L["g0c"][j]
            rows.append((row, -np.inf, -g0) if b else (row, -g0, np.inf))   # g_j(y) <= 0 (upper) or >= 0 (lower)
        if L["split"]:
            for p, i in enumerate(split):
                row = np.zeros(ncol)
                hit = np.flatnonzero(conn == i)
                if hit.size:
                    q = hit[0]
                    cst_p = L["Dc"][p] + D[q] * L["g0c"][q]
                    row[:ny] = -(L["Da"][p] + D[q] * L["G1c"][q])
                else:
                    # a split variable not connected in this Lagrangian: a constant gradient g (in y) times
                    # x_i - xbar_i, minimised over the node box
                    g, xb = self._lag_inputs[k][0][i], self._lag_inputs[k][1][i]
                    cst_p = L["Dc"][p] + (min(g * (blo[i] - xb), g * (bub[i] - xb)) if g != 0 else 0.0)
                    row[:ny] = -L["Da"][p]
                row[tcol + 1 + p] = 1.0
                rows.append((row, cst_p, np.inf))
    if not rows:
        return np.zeros((0, ncol)), np.zeros(0), np.zeros(0)
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


def _eliminate_node_columns(self, path, M, lo, hi):
    """The node rows ``(M, lo, hi)`` over ``[y, eta, t, t_p, s]`` with the node columns ``s_j = sigma_j g_j(y)``
    substituted (``g_j = g0_j + G1_j y`` the qualifying constraint ``j`` of the path, in order): the rows over
    ``[y, eta, t, t_p]`` of docs/gop.md §5/§6b, each defining row ``G1_j y - sigma_j s_j = -g0_j`` becoming the
    qualifying row ``sigma_j g_j(y) >= 0``."""
    ny, ncol = self.bm.ny, self.ncol
    g0 = np.concatenate([self.lags[k]["g0c"] for k, _ in path])
    G1 = np.vstack([self.lags[k]["G1c"] for k, _ in path] + [np.zeros((0, ny))])
    ns = g0.size
    assert M.shape[1] == ncol + ns
    S, out = M[:, ncol:], M[:, :ncol].copy()
    defining = np.flatnonzero(lo == hi)
    assert defining.size == ns
    sigma = -S[defining, np.arange(ns)]
    assert set(np.unique(sigma).tolist()) <= {-1.0, 1.0}
    # a defining row: G1_j y - sigma_j s_j = -g0_j, no other node column
    np.testing.assert_array_equal(S[defining], -np.diag(sigma))
    np.testing.assert_array_equal(out[defining, :ny], G1)
    assert not np.any(out[defining, ny:])
    np.testing.assert_array_equal(lo[defining], -g0)
    Ss = S * sigma                       # the coefficients of g_j(y) in each row
    out[:, :ny] += Ss @ G1
    shift = Ss @ g0
    lo2, hi2 = lo - shift, hi - shift
    lo2[defining] = np.where(sigma > 0, -g0, -np.inf)      # sigma g(y) >= 0 on the row G1 y
    hi2[defining] = np.where(sigma > 0, np.inf, -g0)
    out[defining, :ny] = G1
    return out, lo2, hi2


@pytest.mark.parametrize("name,reduction", [("bgmm_gaussian", True), ("bilinear", True), ("bilinear", False)])
def test_node_rows_match_the_term_by_term_rows(name, reduction, monkeypatch):
    """``GopSearch._node_rows`` (node columns, vectorised over the split variables) against the rows written out term
    by term, at every node of a solve: with the node columns eliminated, entries may differ only by rounding (sums
    in another order)."""
    from varopt.solvers.gop import search as S
    model = MODELS[name]()
    orig, orig_new = S.GopSearch._node_rows, S.GopSearch._new_lagrangian
    seen = {"nodes": 0, "split": 0, "split_not_connected": 0}

    def new_lagrangian(self, lag):
        # the full gradient g0 and linearisation point xbar of every Lagrangian, for the oracle
        self.__dict__.setdefault("_lag_inputs", []).append((lag[2].copy(), lag[4].copy()))
        return orig_new(self, lag)

    def checked(self, path, blo, bub):
        M, lo, hi = orig(self, path, blo, bub)
        Mr, lor, hir = _reference_node_rows(self, path, blo, bub)
        Me, loe, hie = _eliminate_node_columns(self, path, _dense(M), lo, hi)
        np.testing.assert_allclose(Me, Mr, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(loe, lor, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hie, hir, rtol=1e-12, atol=1e-12)
        seen["nodes"] += 1
        seen["split"] += any(self.lags[k]["split"] for k, _ in path)
        seen["split_not_connected"] += any(self.lags[k]["split"] and self.lags[k]["split_rows"]["other"].size
                                           for k, _ in path)
        return M, lo, hi

    monkeypatch.setattr(S.GopSearch, "_node_rows", checked)
    monkeypatch.setattr(S.GopSearch, "_new_lagrangian", new_lagrangian)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60, reduction=reduction)
    assert res.varopt_result.status == "optimal", res.varopt_result.message
    assert seen["nodes"] > 10, seen
    if name == "bgmm_gaussian":
        assert seen["split"] > 10, seen
    if not reduction:
        assert seen["split"] == 0, seen


def _reference_children(self, node, k):
    """The children of ``node`` one bit and one variable at a time (Gray-code order, docs/gop.md §6): the oracle of
    the vectorised ``GopSearch._children`` (symmetry ordering left out: both apply the same ``order_box`` after)."""
    L = self.lags[k]
    conn, xk = L["conn"], L["xkc"]
    c = conn.size
    br = np.isin(conn, self.branchable) if self.opts.reduction else np.zeros(c, dtype=bool)
    for g in range(1 << c):
        gc = g ^ (g >> 1)
        B = np.array([(gc >> (c - 1 - j)) & 1 for j in range(c)], dtype=bool)
        blo, bub = node.blo.copy(), node.bub.copy()
        for j in np.flatnonzero(br):
            i = conn[j]
            if B[j]:
                blo[i] = min(max(blo[i], xk[j]), bub[i])
            else:
                bub[i] = max(min(bub[i], xk[j]), blo[i])
        yield B, blo, bub


@pytest.mark.parametrize("name", ["bgmm_gaussian", "bilinear"])
def test_children_match_the_bit_by_bit_children(name, monkeypatch):
    from varopt.solvers.gop import search as S
    model = MODELS[name]()
    orig = S.GopSearch._children
    seen = {"children": 0, "boxes_cut": 0}

    def checked(self, node, k):
        chain, self.chain = self.chain, None      # compare the boxes before the symmetry ordering
        try:
            got = list(orig(self, node, k))
        finally:
            self.chain = chain
        want = list(_reference_children(self, node, k))
        assert len(got) == len(want)
        for (path, blo, bub), (B, wlo, wub) in zip(got, want):
            assert path[:-1] == node.path and path[-1][0] == k
            np.testing.assert_array_equal(path[-1][1], B)
            np.testing.assert_array_equal(blo, wlo)
            np.testing.assert_array_equal(bub, wub)
            seen["boxes_cut"] += int(np.any(blo != node.blo) or np.any(bub != node.bub))
        seen["children"] += len(got)
        return orig(self, node, k)

    monkeypatch.setattr(S.GopSearch, "_children", checked)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    assert res.varopt_result.status == "optimal", res.varopt_result.message
    assert seen["children"] > 10 and seen["boxes_cut"] > 10, seen


@pytest.mark.parametrize("name", ["bgmm_point", "bgmm_gaussian", "bilinear"])
def test_sibling_rows_are_the_rows_built_from_scratch(name, monkeypatch):
    """``GopSearch._node_rows`` starts a sibling of the last node from that node's rows and rewrites only the rows
    that use a changed box end (plus the last block): at every node they must equal, bit for bit, the rows
    ``_node_rows_full`` builds from the templates."""
    from varopt.solvers.gop import search as S
    model = MODELS[name]()
    orig = S.GopSearch._node_rows
    seen = {"nodes": 0, "siblings": 0, "box_changed": 0}

    def checked(self, path, blo, bub):
        last = self._rows_last
        sibling = (last is not None and len(path) == len(last[0]) and len(path) > 1 and path[-1][0] == last[0][-1][0]
                   and all(a is b for a, b in zip(path[:-1], last[0][:-1])))
        M, lo, hi = _same_as_full(self, orig(self, path, blo, bub), path, blo, bub)
        seen["nodes"] += 1
        seen["siblings"] += sibling
        seen["box_changed"] += sibling and bool(np.any(blo != last[1]) or np.any(bub != last[2]))
        return M, lo, hi

    monkeypatch.setattr(S.GopSearch, "_node_rows", checked)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    assert res.varopt_result.status == "optimal", res.varopt_result.message
    assert seen["siblings"] > 10 and seen["box_changed"] > 10, seen


@pytest.mark.parametrize("name", ["bgmm_gaussian", "bilinear"])
def test_sibling_rows_after_random_box_changes(name, monkeypatch):
    """The paths of a solve, rebuilt as siblings after random changes of the box (any variable, either end) and of
    the last bound combination: ``_node_rows`` from the previous sibling equals ``_node_rows_full`` bit for bit (this
    reaches the rows the solve's own siblings rarely change, e.g. split rows of variables not connected in an
    ancestor's Lagrangian)."""
    from varopt.solvers.gop import search as S
    model = MODELS[name]()
    orig_run = S.GopSearch._run
    kept = {}

    def run(self):
        kept["s"] = self
        return orig_run(self)

    monkeypatch.setattr(S.GopSearch, "_run", run)
    orig_rows = S.GopSearch._node_rows
    paths = []

    def rows(self, path, blo, bub):
        if len(path) > 1 and len(paths) < 400:
            paths.append(path)
        return orig_rows(self, path, blo, bub)

    monkeypatch.setattr(S.GopSearch, "_node_rows", rows)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    assert res.varopt_result.status == "optimal"
    s = kept["s"]
    rng = np.random.default_rng(3)
    lo0 = np.where(np.isfinite(s.xlb), s.xlb, -10.0)
    hi0 = np.where(np.isfinite(s.xub), s.xub, 10.0)
    seen = {"checked": 0, "other_rows": 0}
    if s.split.size:
        # an ancestor whose Lagrangian does not connect a split variable (its split row is then constant in y and
        # uses both box ends): a random Lagrangian with that variable's row of G1 zero
        bm = s.bm
        G1 = rng.normal(size=(bm.nx, bm.ny))
        G1[np.setdiff1d(np.arange(bm.nx), bm.conn_local)] = 0.0
        G1[int(s.split[0])] = 0.0
        g0 = np.zeros(bm.nx)
        g0[bm.conn_local] = rng.normal(size=len(bm.conn_local))
        k_art = s._new_lagrangian((0.0, rng.normal(size=bm.ny), g0, G1, rng.uniform(lo0, hi0), False))
        assert s.lags[k_art]["split_rows"]["other"].size > 0
        art = (k_art, rng.random(s.lags[k_art]["conn"].size) < 0.5)
        paths = paths + [(art,) + p for p in paths[:120]]
    for path in paths[::4]:
        s._rows_last = None
        a, b = np.sort(rng.uniform(lo0, hi0, size=(2, lo0.size)), axis=0)
        orig_rows(s, path, a, b)
        for _ in range(3):
            a2, b2 = a.copy(), b.copy()
            ch = rng.random(a.size) < 0.5
            a2[ch] = np.minimum(a[ch], rng.uniform(lo0, hi0)[ch])
            b2[ch] = np.maximum(b[ch], rng.uniform(lo0, hi0)[ch])
            k, B = path[-1]
            sib = path[:-1] + ((k, rng.random(B.size) < 0.5),)
            _same_as_full(s, orig_rows(s, sib, a2, b2), sib, a2, b2)
            seen["checked"] += 1
            a, b = a2, b2
        seen["other_rows"] += sum(int(s.lags[k]["split"] and s.lags[k]["split_rows"]["other"].size > 0)
                                  for k, _ in path[:-1])
    assert seen["checked"] > 30, seen
    if name == "bgmm_gaussian":
        assert seen["other_rows"] > 5, seen


@pytest.mark.parametrize("name", ["bgmm_gaussian", "bilinear"])
def test_node_column_lps_have_the_values_of_the_term_by_term_lps(name, monkeypatch):
    """The relaxed dual with node columns, solved warm by ``RDModel`` node after node (sibling rows written in place),
    has the value of the LP of docs/gop.md §5/§6b (the rows written out term by term, over the same base rows),
    solved from scratch by SciPy's HiGHS interface: at the paths of a solve with random node boxes and bound
    combinations; infeasible exactly when that LP is."""
    from scipy.optimize import linprog

    from varopt.solvers.gop import search as S
    model = MODELS[name]()
    orig_run, orig_new = S.GopSearch._run, S.GopSearch._new_lagrangian
    kept, paths = {}, []

    def run(self):
        kept["s"] = self
        return orig_run(self)

    def new_lagrangian(self, lag):
        self.__dict__.setdefault("_lag_inputs", []).append((lag[2].copy(), lag[4].copy()))
        return orig_new(self, lag)

    orig_rows = S.GopSearch._node_rows

    def rows(self, path, blo, bub):
        if len(path) > 1 and len(paths) < 300:
            paths.append(path)
        return orig_rows(self, path, blo, bub)

    monkeypatch.setattr(S.GopSearch, "_run", run)
    monkeypatch.setattr(S.GopSearch, "_new_lagrangian", new_lagrangian)
    monkeypatch.setattr(S.GopSearch, "_node_rows", rows)
    res = pyo.SolverFactory("gop").solve(model, mode="gop", rel_gap=1e-6, time_limit=60)
    assert res.varopt_result.status == "optimal"
    s = kept["s"]
    rd = RD.RDModel(s.rd.data())          # the base rows (with the cuts) of the solve's relaxed-dual model
    rd.max_age = 10 ** 9                  # no cut dropped: the base rows stay those of the reference LPs
    base = rd.hm.data()
    Ab, blo_r, bhi_r = base["A"].toarray(), base["row_lo"], base["row_hi"]
    rng = np.random.default_rng(5)
    lo0 = np.where(np.isfinite(s.xlb), s.xlb, -10.0)
    hi0 = np.where(np.isfinite(s.xub), s.xub, 10.0)
    seen = {"optimal": 0, "infeasible": 0, "in_place": 0}
    for path in paths[::3]:
        a, b = np.sort(rng.uniform(lo0, hi0, size=(2, lo0.size)), axis=0)
        for _ in range(2):
            k, B = path[-1]
            sib = path[:-1] + ((k, rng.random(B.size) < 0.5),)
            M, lo, hi = orig_rows(s, sib, a, b)
            seen["in_place"] += rd.node_rows is not None and rd.node_rows[0].shape == M.shape
            out = rd.solve_node(M, lo, hi, oa_tol=np.inf, feas_tol=np.inf, max_rounds=1)
            Mr, lor, hir = _reference_node_rows(s, sib, a, b)
            A = np.vstack([Ab, Mr])
            rlo, rhi = np.concatenate([blo_r, lor]), np.concatenate([bhi_r, hir])
            up, dn = np.isfinite(rhi), np.isfinite(rlo)
            ref = linprog(rd.c[:s.ncol], A_ub=np.vstack([A[up], -A[dn]]), b_ub=np.concatenate([rhi[up], -rlo[dn]]),
                          bounds=list(zip(np.where(np.isfinite(base["lb"]), base["lb"], None),
                                          np.where(np.isfinite(base["ub"]), base["ub"], None))), method="highs")
            if ref.status == 2:
                assert out["status"] == "infeasible", out
                seen["infeasible"] += 1
            else:
                assert ref.status == 0, ref.message
                assert out["status"] == "optimal", out
                assert out["value"] == pytest.approx(ref.fun, rel=1e-7, abs=1e-7)
                seen["optimal"] += 1
            a = np.minimum(a, rng.uniform(lo0, hi0)) if rng.random() < 0.5 else a
            b = np.maximum(b, rng.uniform(lo0, hi0)) if rng.random() < 0.5 else b
    assert seen["optimal"] > 10 and seen["in_place"] > 10, seen
    print(seen)


def test_tiny_box_terms_are_rounded_down():
    """HiGHS drops matrix entries of magnitude <= 1e-9, which would drop a box term ``e_j s_j`` of either sign; a tiny
    ``e_j`` is rounded down instead (to 0 when positive, to ``-TINY_BOX_TERM`` when negative): with ``s_j >= 0`` that
    only weakens a row that bounds a Lagrangian from below. Other coefficients are ``sigma_j (x^B_j - xbar_j)``."""
    from varopt.solvers.gop.search import TINY_BOX_TERM, GopSearch
    L = {"conn": np.arange(5), "xkc": np.array([0.5, 0.5, 0.5, 0.5, 0.5])}
    blo = np.array([0.5 + 3e-10, 0.5 - 3e-10, 0.0, 0.5, 0.2])
    bub = np.array([1.0, 1.0, 0.5 + 4e-10, 0.9, 0.5 - 2e-10])
    B = np.array([False, False, True, True, True])      # lower end, lower end, upper end, upper end, upper end
    e = GopSearch._box_terms(L, B, blo, bub)
    exact = np.where(B, -1.0, 1.0) * (np.where(B, bub, blo) - L["xkc"])
    assert e[0] == 0.0 and exact[0] > 0                 # +3e-10 -> 0
    assert e[1] == -TINY_BOX_TERM and exact[1] < 0      # -3e-10 -> -1e-8
    assert e[2] == -TINY_BOX_TERM and exact[2] < 0      # sigma = -1: -4e-10 -> -1e-8
    assert e[3] == exact[3] == -(0.9 - 0.5)
    assert e[4] == 0.0 and exact[4] > 0                 # sigma = -1: +2e-10 -> 0
    assert np.all(e <= exact) and abs(TINY_BOX_TERM) > 1e-9   # rounded down, and kept by HiGHS
