"""The ``trw`` solver: tree-reweighted sum-product (Wainwright, Jaakkola & Willsky 2005).

For edge appearance probabilities ``rho`` of a distribution over spanning trees (a point of the
spanning-tree polytope), log Z <= max over the local polytope of
``B(tau) = <theta, tau> + sum_i H(tau_i) - sum_e rho_e I_e(tau_e)`` (concave), and the fixed
points of the reweighted messages (:mod:`varopt.solvers.lbp.messages`) are its maximisers. The
value at the pseudo-marginals is reported as ``log_partition`` (the TRW estimate). **When the messages
converged** (``tol``) an upper bound on log Z is reported as ``log_partition_upper``: not that value, which
at messages stopped at ``tol`` can lie O(tol) below max B and below log Z, but the certificate of
:mod:`.certificate` (B at a point of the local polytope plus a first-order slack), valid for any messages.

``edge_probs='uniform'`` (default) takes ``rho`` of the *uniform distribution over spanning
trees*: by Kirchhoff's theorem ``rho_e`` is the effective resistance between the ends of ``e``
with unit resistors, ``rho_e = (e_i - e_j)^T L^+ (e_i - e_j)`` (L the graph Laplacian), which is
always in the polytope and equals ``(n - 1)/|E|`` on edge-transitive graphs (tori, complete
graphs). Computed per component from the Laplacian grounded at one node: the entries of its inverse on the
diagonal and the edges by selected inversion of its sparse LDL^T factor (:mod:`.selected_inverse`, with numba;
without it one sparse LU solve per edge). An array gives
``rho`` directly (in the order of ``info['edges']``); the bound is then reported only when the
array is checked to lie in the forest polytope, below the spanning-tree polytope
(:mod:`.polytope`: one max-flow per node, up to 3000 nodes; within eps the bound is certified for rho/(1 + eps));
otherwise the value is an estimate (``info['edge_probs_excess']``, the message says why).
"""
from __future__ import annotations

import copy
import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import splu

from ...core.backend import numba_available
from ...errors import InvalidOptionError
from ...options import Option, OptionSet
from ...registry import Solver, register_solver
from ..energy_result import finish, log_potential
from ..lbp.messages import Messages, run_messages
from ..lbp.solver import message_options
from .certificate import certified_upper_bound
from .polytope import MAX_NODES, forest_excess

#: ``method='auto'`` uses selected inversion from this many edges: below, the per-edge solves take under 0.3 s,
#: less than compiling the kernels once (~3 s, then cached)
SELECTED_MIN_EDGES = 2000


def spanning_tree_probabilities(n, i, j, block=512, check=None, method="auto"):
    """Probability of each edge ``(i_e, j_e)`` in a uniformly random spanning tree (forest): its effective
    resistance ``Z_ii + Z_jj - 2 Z_ij``, ``Z`` the inverse of the Laplacian grounded at one node per component.

    ``method='selected'`` (``'auto'`` with numba and at least ``SELECTED_MIN_EDGES`` edges): those entries of
    Z lie on the pattern of the sparse LDL^T factor, and selected inversion (:mod:`.selected_inverse`;
    Takahashi, Fagan & Chen 1973) gets them all for about the cost of the factorisation. ``'solves'`` (the
    reference, and otherwise ``'auto'``): one sparse LU of the grounded Laplacian, then a solve per edge (in
    blocks of ``block``), |E| times the size of the factors. Both use the minimum-degree ordering of ``L``
    (symmetric positive definite: no pivoting needed), which halves the factors' fill against SuperLU's
    default COLAMD on random graphs (6-regular, 5000 nodes: 5.4e6 against 1.2e7 entries, 104 s -> 30 s with
    the solves). ``check()`` (the run loop's time limit; True stops, and None is returned) is called after
    SuperLU's factorisation (selected inversion) or after every block of solves."""
    if method not in ("auto", "selected", "solves"):
        raise ValueError(f"method must be 'auto', 'selected' or 'solves' (got {method!r})")
    i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    m = i.size
    if m == 0:
        return np.zeros(0)
    A = sp.csr_matrix((np.ones(2 * m), (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(n, n))
    L = (sp.diags(np.asarray(A.sum(axis=1)).ravel()) - A).tocsc()
    _, lab = connected_components(A, directed=False)
    ground = np.zeros(n, dtype=bool)
    ground[np.unique(lab, return_index=True)[1]] = True  # one grounded node per component
    keep = np.flatnonzero(~ground)
    pos = np.full(n, -1)
    pos[keep] = np.arange(keep.size)
    if keep.size == 0:
        return np.ones(m)
    K = L[keep][:, keep].tocsc()
    lu = splu(K, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    if method == "selected" or (method == "auto" and m >= SELECTED_MIN_EDGES and numba_available()):
        from .selected_inverse import resistances
        if check is not None and check():
            return None
        # SuperLU's minimum-degree order (perm_c maps a position of the order to a column: its inverse)
        R = resistances(K, pos[i], pos[j], np.argsort(lu.perm_c))
        if R is not None:
            return np.clip(R, 1e-12, 1.0)
        if method == "selected":
            raise np.linalg.LinAlgError("selected inversion failed: the grounded Laplacian's LDL^T met a "
                                        "non-positive pivot")
    R = np.empty(m)
    for s in range(0, m, block):
        e = np.arange(s, min(m, s + block))
        B = np.zeros((keep.size, e.size))
        pi, pj = pos[i[e]], pos[j[e]]
        ok = pi >= 0
        B[pi[ok], np.flatnonzero(ok)] += 1.0
        ok = pj >= 0
        B[pj[ok], np.flatnonzero(ok)] -= 1.0
        X = lu.solve(B)
        R[e] = np.einsum("ke,ke->e", B, X)
        if check is not None and check():
            return None
    return np.clip(R, 1e-12, 1.0)


def _polish(msgs, damping, run, sweeps=200):
    """A copy of ``msgs`` swept on until the largest change is at rounding level (1e-15 of the largest
    message), stalls for 5 sweeps, ``sweeps`` are done or time runs out; None if the messages turn non-finite."""
    p = copy.copy(msgs)
    p.u = msgs.u.copy()
    p.sweeps, best, stall = 0, math.inf, 0
    for _ in range(sweeps):
        d = p.step(damping)
        p.sweeps += 1
        if not np.isfinite(d):
            return None
        late = run.time_limit is not None and run.elapsed() >= run.time_limit   # not run.out_of_time(): it
        if d <= 1e-15 * (1.0 + float(np.abs(p.u).max(initial=0.0))) or late:  # would stop the converged run
            break
        best, stall = (d, 0) if d < best else (best, stall + 1)
        if stall >= 5:
            break
    return p


def _edge_probs(v):
    if isinstance(v, str):
        if v != "uniform":
            raise InvalidOptionError("option 'edge_probs' must be 'uniform' or an array of probabilities")
        return v
    a = np.asarray(v, dtype=float).ravel()
    if not np.isfinite(a).all() or (a <= 0).any() or (a > 1).any():
        raise InvalidOptionError("option 'edge_probs' must hold probabilities in (0, 1]")
    return a


@register_solver
class TreeReweightedBP(Solver):
    name = "trw"
    summary = "tree-reweighted belief propagation for energy models: upper bound on log Z when converged"
    accepts_binary = True
    options = OptionSet(message_options() + [
        Option("edge_probs", "uniform", "edge appearance probabilities: 'uniform' (uniform distribution over "
               "spanning trees: effective resistances) or an array in the order of info['edges']", _edge_probs),
    ])

    def _solve(self, program, opts, run):
        model = log_potential(program, opts, self.name)
        if isinstance(opts.edge_probs, str):
            rho = spanning_tree_probabilities(model.n, model.i, model.j, check=run.out_of_time)
            if rho is None:
                return run.finish(message=f"{run.message} while computing the edge appearance probabilities "
                                  f"(effective resistances of {model.m} edges); no estimate (lbp, rho = 1, has "
                                  "no such step)")
        else:
            rho = opts.edge_probs
            if rho.size != model.m:
                raise InvalidOptionError(f"option 'edge_probs' has {rho.size} entries, the model has {model.m} "
                                         "coupled pairs")
        msgs = Messages(model, rho)
        msgs.initialise(opts.init, opts.seed)
        converged, delta = run_messages(msgs, opts, run, self.name)
        val, mu, corr = msgs.objective()
        info = {"converged": converged, "max_change": delta, "edge_probs": rho}
        why = None
        if not isinstance(opts.edge_probs, str):
            eps, node = forest_excess(model.n, model.i, model.j, rho)
            info["edge_probs_excess"] = eps
            if eps is None:
                why = f"edge_probs could not be checked ({model.n} nodes > {MAX_NODES})"
            elif eps > 1e-3:
                why = (f"edge_probs is not in the spanning-tree polytope: a set S of nodes containing "
                       f"{program.names[node]!r} has rho(E(S)) = |S| - 1 + {eps:.3g}")
            # else: rho/(1 + eps) is inside (polytope.py), and the certificate below is taken for it
        if converged and why is None:
            # B at messages stopped at tol is below max B by O(tol), and can be below log Z: the bound is
            # certified from the messages instead (certificate.py: B at a point of LOCAL + first-order slack)
            cert = msgs
            if info.get("edge_probs_excess"):
                # rho = edge_probs lies eps outside the forest polytope, where B_rho need not be concave (the
                # certificate assumes it): certify max B_{rho/(1+eps)} instead (inside; polytope.py), which
                # bounds log Z by itself, from the same messages (any messages are valid)
                cert = Messages(model, rho / (1.0 + info["edge_probs_excess"]))
                cert.u = msgs.u.copy()
            bound, det = certified_upper_bound(cert)
            polished = _polish(cert, opts.damping, run)
            if polished is not None:
                # the slack is the residual amplified by up to cosh^2(w/rho): sweeps past tol shrink it (random
                # models with |w| ~ 3: largest excess over the TRW value 3.5 -> 0.017); both bounds are valid
                b2, d2 = certified_upper_bound(polished)
                if b2 < bound:
                    bound, det = b2, d2
                info["bound_polish_sweeps"] = polished.sweeps
            info.update(bound_value=det["value"], bound_slack=det["slack"], bound_rounding=det["rounding"],
                        bound_max_gradient=det["max_gradient"])
            # log_partition stays the TRW value at the messages (the estimate, O(tol) from max B either way);
            # the certified bound is log_partition_upper (and the Result's lower bound on the free energy)
            return finish(run, program, opts, model, val, mu, corr, upper=bound, status="converged",
                          message="messages converged; upper bound on log Z in info['log_partition_upper'] "
                          "(certified from the messages)", info=info)
        if converged:
            return finish(run, program, opts, model, val, mu, corr, status="converged",
                          message=f"messages converged; no bound reported: {why}", info=info)
        return finish(run, program, opts, model, val, mu, corr,
                      message=f"messages did not converge (last change {delta:.3g}); no bound reported",
                      info=info)
