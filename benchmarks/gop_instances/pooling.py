"""Standard pooling problems in the P- and the PQ-formulation (Tawarmalani & Sahinidis 2002).

P-formulation (Haverly 1978): flows ``x[c,o]`` (component -> pool), ``y[o,p]`` (pool ->
product), ``z[c,p]`` (component -> product) and pool qualities ``w[o,k]``::

    min  sum_c cost_c (sum_o x[c,o] + sum_p z[c,p]) - sum_p price_p (sum_o y[o,p] + sum_c z[c,p])
    s.t. sum_o x[c,o] + sum_p z[c,p] <= A_c                      (availability)
         sum_c x[c,o] <= S_o                                      (pool capacity)
         D^L_p <= sum_o y[o,p] + sum_c z[c,p] <= D^U_p           (demand)
         sum_c x[c,o] == sum_p y[o,p]                             (pool balance)
         sum_c lambda[c,k] x[c,o] == w[o,k] * sum_p y[o,p]        (pool quality, bilinear)
         sum_o w[o,k] y[o,p] + sum_c lambda[c,k] z[c,p] <= P^U[p,k] (sum_o y[o,p] + sum_c z[c,p])
         (and >= P^L[p,k] (...) where a lower specification is published)

``x`` has only its lower bound 0 (its upper bound is implied by the availability and capacity
rows, as published); ``y`` and ``z`` have the published arc bounds; ``w[o,k]`` lies between
the smallest and largest quality of the components feeding pool ``o``.

PQ-formulation (Quesada & Grossmann 1995; Tawarmalani & Sahinidis 2002, section 2): pool
input *fractions* ``q[c,o]`` in [0, 1] replace ``x[c,o] = q[c,o] * sum_p y[o,p]``, and the
two families of redundant reformulation-linearization rows that define "PQ" are added::

    sum_c q[c,o] == 1,   sum_c q[c,o] y[o,p] == y[o,p],   sum_p q[c,o] y[o,p] <= S_o q[c,o].

Both formulations have the same optimal value (the published optimum of the instance).
"""
from __future__ import annotations

import pyomo.environ as pyo

from . import Instance
from .pooling_data import POOLING, POOLING_LATE


def _common(m, d):
    m.C = pyo.Set(initialize=list(d["comps"]))
    m.P = pyo.Set(initialize=list(d["prods"]))
    m.O = pyo.Set(initialize=list(d["pools"]))
    m.Y = pyo.Set(initialize=list(d["yarcs"]), dimen=2)
    m.Z = pyo.Set(initialize=list(d["zarcs"]), dimen=2)
    m.y = pyo.Var(m.Y, bounds=lambda m, o, p: (0, d["yarcs"][o, p]))
    m.z = pyo.Var(m.Z, bounds=lambda m, c, p: (0, d["zarcs"][c, p]))
    nq = len(next(iter(d["comps"].values()))[2])
    m.K = pyo.RangeSet(0, nq - 1)


def _sold(m, p):
    return sum(m.y[o, q] for (o, q) in m.Y if q == p) + sum(m.z[c, q] for (c, q) in m.Z if q == p)


def _demand(m, d):
    def rule(m, p):
        lo, up = d["prods"][p][0], d["prods"][p][1]
        return (lo if lo > 0 else None, _sold(m, p), up)
    m.demand = pyo.Constraint(m.P, rule=rule)


def _spec_rows(m, d, content):
    """Product quality specifications; ``content(p, k)`` is the quality content sent to p."""
    def up(m, p, k):
        return content(p, k) <= d["prods"][p][4][k] * _sold(m, p)

    def lo(m, p, k):
        ql = d["prods"][p][3]
        if ql is None or ql[k] <= 0:
            return pyo.Constraint.Skip
        return content(p, k) >= ql[k] * _sold(m, p)
    m.spec_up = pyo.Constraint(m.P, m.K, rule=up)
    m.spec_lo = pyo.Constraint(m.P, m.K, rule=lo)


def p_formulation(key):
    d = _DATA[key]
    m = pyo.ConcreteModel()
    _common(m, d)
    lam = {c: v[2] for c, v in d["comps"].items()}
    m.X = pyo.Set(initialize=d["xarcs"], dimen=2)
    m.x = pyo.Var(m.X, domain=pyo.NonNegativeReals)
    feeds = {o: [c for (c, oo) in d["xarcs"] if oo == o] for o in d["pools"]}
    m.w = pyo.Var(m.O, m.K, bounds=lambda m, o, k: (min(lam[c][k] for c in feeds[o]),
                                                    max(lam[c][k] for c in feeds[o])))
    cost = {c: v[1] for c, v in d["comps"].items()}
    price = {p: v[2] for p, v in d["prods"].items()}
    m.obj = pyo.Objective(expr=sum(cost[c] * m.x[c, o] for (c, o) in m.X)
                          + sum((cost[c] - price[p]) * m.z[c, p] for (c, p) in m.Z)
                          - sum(price[p] * m.y[o, p] for (o, p) in m.Y))
    m.avail = pyo.Constraint(m.C, rule=lambda m, c: sum(m.x[cc, o] for (cc, o) in m.X if cc == c)
                             + sum(m.z[cc, p] for (cc, p) in m.Z if cc == c) <= d["comps"][c][0])
    m.capacity = pyo.Constraint(m.O, rule=lambda m, o: sum(m.x[c, oo] for (c, oo) in m.X if oo == o)
                                <= d["pools"][o])
    _demand(m, d)

    def out(m, o):
        return sum(m.y[oo, p] for (oo, p) in m.Y if oo == o)
    m.balance = pyo.Constraint(m.O, rule=lambda m, o: sum(m.x[c, oo] for (c, oo) in m.X if oo == o) == out(m, o))
    m.pool_quality = pyo.Constraint(m.O, m.K, rule=lambda m, o, k: sum(
        lam[c][k] * m.x[c, oo] for (c, oo) in m.X if oo == o) == m.w[o, k] * out(m, o))

    def content(p, k):
        return (sum(m.w[o, k] * m.y[o, pp] for (o, pp) in m.Y if pp == p)
                + sum(lam[c][k] * m.z[c, pp] for (c, pp) in m.Z if pp == p))
    _spec_rows(m, d, content)
    return m


def pq_formulation(key):
    d = _DATA[key]
    m = pyo.ConcreteModel()
    _common(m, d)
    lam = {c: v[2] for c, v in d["comps"].items()}
    m.X = pyo.Set(initialize=d["xarcs"], dimen=2)
    m.q = pyo.Var(m.X, bounds=(0, 1))
    cost = {c: v[1] for c, v in d["comps"].items()}
    price = {p: v[2] for p, v in d["prods"].items()}

    def to_pool(c, o):  # flow from c into pool o, x[c,o] = q[c,o] * (outflow of o)
        return sum(m.q[c, o] * m.y[oo, p] for (oo, p) in m.Y if oo == o)
    m.obj = pyo.Objective(expr=sum(cost[c] * to_pool(c, o) for (c, o) in m.X)
                          + sum((cost[c] - price[p]) * m.z[c, p] for (c, p) in m.Z)
                          - sum(price[p] * m.y[o, p] for (o, p) in m.Y))
    m.simplex = pyo.Constraint(m.O, rule=lambda m, o: sum(m.q[c, oo] for (c, oo) in m.X if oo == o) == 1)
    m.avail = pyo.Constraint(m.C, rule=lambda m, c: sum(to_pool(cc, o) for (cc, o) in m.X if cc == c)
                             + sum(m.z[cc, p] for (cc, p) in m.Z if cc == c) <= d["comps"][c][0])
    m.capacity = pyo.Constraint(m.O, rule=lambda m, o: sum(m.y[oo, p] for (oo, p) in m.Y if oo == o)
                                <= d["pools"][o])
    _demand(m, d)

    def content(p, k):
        return (sum(lam[c][k] * m.q[c, o] * m.y[o, p] for (o, pp) in m.Y if pp == p
                    for (c, oo) in m.X if oo == o)
                + sum(lam[c][k] * m.z[c, pp] for (c, pp) in m.Z if pp == p))
    _spec_rows(m, d, content)
    m.rlt_out = pyo.Constraint(m.Y, rule=lambda m, o, p: sum(
        m.q[c, oo] * m.y[o, p] for (c, oo) in m.X if oo == o) == m.y[o, p])
    m.rlt_cap = pyo.Constraint(m.X, rule=lambda m, c, o: to_pool(c, o) <= d["pools"][o] * m.q[c, o])
    return m


#: Haverly's (1978) optimal blend for case 1: only crude B (quality 1) enters the pool, 100 units
#: to product Y, blended with 100 units of crude C (quality 2) to Y's limit of 1.5.
_HAVERLY1_POINT = {"x[c2,o1]": 100.0, "y[o1,p2]": 100.0, "z[c3,p2]": 100.0, "w[o1,0]": 1.0}

_DATA = {**POOLING, **POOLING_LATE}
INSTANCES = []
for _key, _d in _DATA.items():
    _late = _key in POOLING_LATE
    INSTANCES.append(Instance(f"{_key}_p", "pooling-p", p_formulation, _d["optimum"], "min",
                              _d["origin"] + "; P-formulation", args=(_key,),
                              point=_HAVERLY1_POINT if _key == "haverly1" else None, late=_late))
    INSTANCES.append(Instance(f"{_key}_pq", "pooling-pq", pq_formulation, _d["optimum"], "min",
                              _d["origin"] + "; PQ-formulation", args=(_key,), late=_late))
