"""Nonconvex quadratic programs whose objective is not biconvex: concave and indefinite quadratics.

All added after the held-out rule was fixed (``late=True``, held out by construction, never tuned on).

* ``ex2_1_1`` ... ``ex2_1_6``, ``ex2_1_9`` -- Floudas et al. (1999), Handbook chapter 2, quadratic
  programming test problems: concave quadratic objectives over polytopes (``ex2_1_1``: Floudas & Pardalos
  1990's test problem 1; ``ex2_1_9``: the Motzkin-Straus-type maximisation of a sum of products over the
  simplex, not biconvex because its products form odd cycles).  Written with the objective the Handbook
  states (GLOBALLib moves it into a row ``objvar == f(x)``); bounds and optima as in GLOBALLib / MINLPLib,
  as also generated in YALMIP's global test suite (``test_global_ex2_1_*.m``).
* ``ex3_1_3`` -- Handbook chapter 3 (Hock & Schittkowski 1981, problem 2-like concave objective with two
  reverse-convex rows ``(x3 - 3)^2 + x4 >= 4``).
* ``st_e24`` -- GLOBALLib ``st_e24`` (Sahinidis group collection): the product of two affine functions
  ``(5 + x1 - x2)(x1 + x2 - 1) + x1`` over a polytope, an indefinite quadratic.
* ``st_cqpjk2``, ``st_qpc-m0``, ``st_z`` -- GLOBALLib models written as the MINLPLib model files write them
  (a free ``objvar`` and a row ``objvar == f(x)``, no solver option): a convex QP and two concave QPs whose
  variables are bounded only through their rows (they found two tree bugs, docs/gop.md §12b).
"""
from __future__ import annotations

import pyomo.environ as pyo

from . import Instance
from .floudas import HANDBOOK


def _box(n, bounds=None, default=(0, 1)):
    bounds = bounds or {}
    m = pyo.ConcreteModel()
    m.x = pyo.Var(pyo.RangeSet(1, n), bounds=lambda m, i: bounds.get(i, default))
    return m


def ex2_1_1():
    m = _box(5)
    x = m.x
    m.obj = pyo.Objective(expr=42 * x[1] + 44 * x[2] + 45 * x[3] + 47 * x[4] + 47.5 * x[5]
                          - 0.5 * sum(100 * x[i] * x[i] for i in range(1, 6)))
    m.c1 = pyo.Constraint(expr=20 * x[1] + 12 * x[2] + 11 * x[3] + 7 * x[4] + 4 * x[5] <= 40)
    return m


def ex2_1_2():
    m = _box(6, {6: (0, None)})
    x = m.x
    m.obj = pyo.Objective(expr=-0.5 * sum(x[i] * x[i] for i in range(1, 6))
                          - 10.5 * x[1] - 7.5 * x[2] - 3.5 * x[3] - 2.5 * x[4] - 1.5 * x[5] - 10 * x[6])
    m.c1 = pyo.Constraint(expr=6 * x[1] + 3 * x[2] + 3 * x[3] + 2 * x[4] + x[5] <= 6.5)
    m.c2 = pyo.Constraint(expr=10 * x[1] + 10 * x[3] + x[6] <= 20)
    return m


def ex2_1_3():
    m = _box(13, {10: (0, None), 11: (0, None), 12: (0, None)})
    x = m.x
    m.obj = pyo.Objective(expr=5 * sum(x[i] for i in range(1, 5)) - 0.5 * sum(10 * x[i] * x[i] for i in range(1, 5))
                          - sum(x[i] for i in range(5, 14)))
    m.c1 = pyo.Constraint(expr=2 * x[1] + 2 * x[2] + x[10] + x[11] <= 10)
    m.c2 = pyo.Constraint(expr=2 * x[1] + 2 * x[3] + x[10] + x[12] <= 10)
    m.c3 = pyo.Constraint(expr=2 * x[2] + 2 * x[3] + x[11] + x[12] <= 10)
    m.c4 = pyo.Constraint(expr=-8 * x[1] + x[10] <= 0)
    m.c5 = pyo.Constraint(expr=-8 * x[2] + x[11] <= 0)
    m.c6 = pyo.Constraint(expr=-8 * x[3] + x[12] <= 0)
    m.c7 = pyo.Constraint(expr=-2 * x[4] - x[5] + x[10] <= 0)
    m.c8 = pyo.Constraint(expr=-2 * x[6] - x[7] + x[11] <= 0)
    m.c9 = pyo.Constraint(expr=-2 * x[8] - x[9] + x[12] <= 0)
    return m


def ex2_1_4():
    m = _box(6, {2: (0, None), 3: (0, None), 6: (0, 2)})
    x = m.x
    m.obj = pyo.Objective(expr=6.5 * x[1] - 0.5 * x[1] * x[1] - x[2] - 2 * x[3] - 3 * x[4] - 2 * x[5] - x[6])
    m.c1 = pyo.Constraint(expr=x[1] + 2 * x[2] + 8 * x[3] + x[4] + 3 * x[5] + 5 * x[6] <= 16)
    m.c2 = pyo.Constraint(expr=-8 * x[1] - 4 * x[2] - 2 * x[3] + 2 * x[4] + 4 * x[5] - x[6] <= -1)
    m.c3 = pyo.Constraint(expr=2 * x[1] + 0.5 * x[2] + 0.2 * x[3] - 3 * x[4] - x[5] - 4 * x[6] <= 24)
    m.c4 = pyo.Constraint(expr=0.2 * x[1] + 2 * x[2] + 0.1 * x[3] - 4 * x[4] + 2 * x[5] + 2 * x[6] <= 12)
    m.c5 = pyo.Constraint(expr=-0.1 * x[1] - 0.5 * x[2] + 2 * x[3] + 5 * x[4] - 5 * x[5] + 3 * x[6] <= 3)
    return m


_A6 = [[-2, -6, -1, 0, -3, -3, -2, -6, -2, -2],
       [6, -5, 8, -3, 0, 1, 3, 8, 9, -3],
       [-5, 6, 5, 3, 8, -8, 9, 2, 0, -9],
       [9, 5, 0, -9, 1, -8, 3, -9, -9, -3],
       [-8, 7, -4, -5, -9, 1, -7, -1, 3, -2]]
_B6 = [-4, 22, -6, -23, -12]


def ex2_1_5():
    m = _box(10)
    x = m.x
    m.obj = pyo.Objective(expr=-0.5 * sum(10 * x[i] * x[i] for i in range(1, 8))
                          - 20 * x[1] - 80 * x[2] - 20 * x[3] - 50 * x[4] - 60 * x[5] - 90 * x[6]
                          + 10 * (x[8] + x[9] + x[10]))
    rows = _A6 + [[-7, -5, -2, 0, -6, -6, -7, -6, 7, 7],
                  [1, -3, -3, -4, -1, 0, -4, 1, 6, 0],
                  [1, -2, 6, 9, 0, -7, 9, -9, -6, 4],
                  [-4, 6, 7, 2, 2, 0, 6, 6, -7, 4],
                  [1] * 10, [-1] * 10]
    rhs = _B6 + [-3, 1, 12, 15, 9, -1]
    m.c = pyo.Constraint(range(len(rows)), rule=lambda m, k: sum(a * m.x[j + 1] for j, a in enumerate(rows[k]) if a)
                         <= rhs[k])
    return m


def ex2_1_6():
    m = _box(10)
    x = m.x
    lin = [48, 42, 48, 45, 44, 41, 47, 42, 45, 46]
    m.obj = pyo.Objective(expr=sum(lin[i - 1] * x[i] for i in range(1, 11))
                          - 0.5 * sum(100 * x[i] * x[i] for i in range(1, 11)))
    m.c = pyo.Constraint(range(len(_A6)), rule=lambda m, k: sum(a * m.x[j + 1] for j, a in enumerate(_A6[k]) if a)
                         <= _B6[k])
    return m


_PAIRS9 = [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 9), (9, 10), (1, 3), (2, 4), (3, 5),
           (4, 6), (5, 7), (6, 8), (7, 9), (8, 10), (1, 9), (1, 10), (2, 10), (1, 5), (4, 7)]


def ex2_1_9():
    """max sum of the products of 22 pairs over the simplex (as a minimisation); x >= 0 bounded only by the simplex."""
    m = _box(10, default=(0, None))
    x = m.x
    m.obj = pyo.Objective(expr=-sum(x[i] * x[j] for i, j in _PAIRS9))
    m.simplex = pyo.Constraint(expr=sum(x[i] for i in range(1, 11)) == 1)
    return m


_A7 = [[-3, 7, 0, -5, 1, 1, 0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6],
       [7, 0, -5, 1, 1, 0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3],
       [0, -5, 1, 1, 0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7],
       [-5, 1, 1, 0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7, 0],
       [1, 1, 0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7, 0, -5],
       [1, 0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7, 0, -5, 1],
       [0, 2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7, 0, -5, 1, 1],
       [2, -1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7, 0, -5, 1, 1, 0],
       [-1, -1, -9, 3, 5, 0, 0, 1, 7, -7, -4, -6, -3, 7, 0, -5, 1, 1, 0, 2],
       [1] * 20]
_B7 = [-5, 2, -1, -3, 5, 4, -1, 0, 9, 40]


def ex2_1_7():
    """Twenty variables, ten rows (a cyclic pattern of coefficients), concave separable objective; x >= 0
    bounded only through the rows."""
    m = _box(20, default=(0, None))
    x = m.x
    m.obj = pyo.Objective(expr=-0.5 * sum(i * (x[i] - 2) ** 2 for i in range(1, 21)))
    m.c = pyo.Constraint(range(len(_A7)), rule=lambda m, k: sum(a * m.x[j + 1] for j, a in enumerate(_A7[k]) if a)
                         <= _B7[k])
    return m


_A10 = [[3, 5, 5, 6, 4, 4, 5, 6, 4, 4, 8, 4, 2, 1, 1, 1, 2, 1, 7, 3],
        [5, 4, 5, 4, 1, 4, 4, 2, 5, 2, 3, 6, 1, 7, 7, 5, 8, 7, 2, 1],
        [1, 5, 2, 4, 7, 3, 1, 5, 7, 6, 1, 7, 2, 4, 7, 5, 3, 4, 1, 2],
        [3, 2, 6, 3, 2, 1, 6, 1, 7, 3, 7, 7, 8, 2, 3, 4, 5, 8, 1, 2],
        [6, 6, 6, 4, 5, 2, 2, 4, 3, 2, 7, 5, 3, 6, 7, 5, 8, 4, 6, 3],
        [5, 5, 2, 1, 3, 5, 5, 7, 4, 3, 4, 1, 7, 3, 8, 3, 1, 6, 2, 8],
        [3, 6, 6, 3, 1, 6, 1, 6, 7, 1, 4, 3, 1, 4, 3, 6, 4, 6, 5, 4],
        [1, 2, 1, 7, 8, 7, 6, 5, 8, 7, 2, 3, 5, 5, 4, 5, 4, 2, 2, 8],
        [8, 5, 2, 5, 3, 8, 1, 3, 3, 5, 4, 5, 5, 6, 1, 7, 1, 2, 2, 4],
        [1] * 20]
_B10 = [380, 415, 385, 405, 470, 415, 400, 460, 400, 200]
# 0.5 w_i (x_i - c_i)^2: concave (subtracted) for x1..x10, convex for x11..x20
_W10 = [63, 15, 44, 91, 45, 50, 89, 58, 86, 82, 42, 98, 48, 91, 11, 63, 61, 61, 38, 26]
_C10 = [-19, -27, -23, -53, -42, 26, -33, -23, 41, 19, -52, -3, 81, 30, -85, 68, 27, -81, 97, -73]


def ex2_1_10():
    """Twenty variables, ten rows, a separable indefinite objective: concave in x1..x10, convex in x11..x20."""
    m = _box(20, default=(0, None))
    x = m.x
    m.obj = pyo.Objective(expr=0.5 * sum(_W10[i - 1] * (x[i] - _C10[i - 1]) ** 2 for i in range(11, 21))
                          - 0.5 * sum(_W10[i - 1] * (x[i] - _C10[i - 1]) ** 2 for i in range(1, 11)))
    m.c = pyo.Constraint(range(len(_A10)), rule=lambda m, k: sum(a * m.x[j + 1] for j, a in enumerate(_A10[k]))
                         <= _B10[k])
    return m


def st_bsj4():
    """GLOBALLib ``st_bsj4``: a separable concave QP in six variables on [0, 99]^6 with four rows."""
    m = _box(6, default=(0, 99))
    x = m.x
    m.obj = pyo.Objective(expr=10.5 * x[1] - 1.5 * x[1] ** 2 - x[2] ** 2 - 3.95 * x[2] - x[3] ** 2 + 3 * x[3]
                          - 2 * x[4] ** 2 + 5 * x[4] - x[5] ** 2 + 1.5 * x[5] - 2.5 * x[6] ** 2 - 1.5 * x[6])
    m.e1 = pyo.Constraint(expr=sum(x[i] for i in range(1, 7)) <= 500)
    m.e2 = pyo.Constraint(expr=x[1] + 3 * x[2] + 6 * x[3] + 2 * x[4] >= 50)
    m.e3 = pyo.Constraint(expr=3 * x[5] + 4 * x[6] >= 50)
    m.e4 = pyo.Constraint(expr=x[3] + 2 * x[4] + 3 * x[5] + x[6] <= 350)
    return m


def ex3_1_3():
    m = _box(6, {1: (0, None), 2: (0, None), 3: (1, 5), 4: (0, 6), 5: (1, 5), 6: (0, 10)})
    x = m.x
    m.obj = pyo.Objective(expr=-25 * (x[1] - 2) ** 2 - (x[2] - 2) ** 2 - (x[3] - 1) ** 2 - (x[4] - 4) ** 2
                          - (x[5] - 1) ** 2 - (x[6] - 4) ** 2)
    m.r1 = pyo.Constraint(expr=(x[3] - 3) ** 2 + x[4] >= 4)
    m.r2 = pyo.Constraint(expr=(x[5] - 3) ** 2 + x[6] >= 4)
    m.c1 = pyo.Constraint(expr=x[1] - 3 * x[2] <= 2)
    m.c2 = pyo.Constraint(expr=-x[1] + x[2] <= 2)
    m.c3 = pyo.Constraint(expr=x[1] + x[2] <= 6)
    m.c4 = pyo.Constraint(expr=x[1] + x[2] >= 2)
    return m


def st_e24():
    m = pyo.ConcreteModel()
    m.x1 = pyo.Var(bounds=(0, 4))
    m.x2 = pyo.Var(bounds=(1, 5))
    m.obj = pyo.Objective(expr=(5 + m.x1 - m.x2) * (m.x1 + m.x2 - 1) + m.x1)
    m.e1 = pyo.Constraint(expr=2 * m.x1 + 3 * m.x2 >= 9)
    m.e2 = pyo.Constraint(expr=3 * m.x1 - m.x2 <= 8)
    m.e3 = pyo.Constraint(expr=-m.x1 + 2 * m.x2 <= 8)
    m.e4 = pyo.Constraint(expr=m.x1 + 2 * m.x2 <= 12)
    return m


def _ch2(name, what):
    return (HANDBOOK + f", chapter 2, quadratic programming ({what}); model and optimum as in GLOBALLib/MINLPLib "
            f"{name} (as generated in YALMIP's global test suite, test_global_{name}.m)")


INSTANCES = [
    Instance("ex2_1_1", "floudas-ch2", ex2_1_1, -17.0, "min", _ch2("ex2_1_1", "concave QP, one knapsack row"),
             late=True),
    Instance("ex2_1_2", "floudas-ch2", ex2_1_2, -213.0, "min", _ch2("ex2_1_2", "concave QP"), late=True),
    Instance("ex2_1_3", "floudas-ch2", ex2_1_3, -15.0, "min", _ch2("ex2_1_3", "concave QP"), late=True),
    Instance("ex2_1_4", "floudas-ch2", ex2_1_4, -11.0, "min", _ch2("ex2_1_4", "concave QP"), late=True),
    Instance("ex2_1_5", "floudas-ch2", ex2_1_5, -268.0146, "min", _ch2("ex2_1_5", "concave QP"), late=True),
    Instance("ex2_1_6", "floudas-ch2", ex2_1_6, -39.0, "min", _ch2("ex2_1_6", "concave QP"), late=True),
    Instance("ex2_1_9", "floudas-ch2", ex2_1_9, -0.375, "min",
             _ch2("ex2_1_9", "maximum of a sum of products over the simplex"), late=True),
    Instance("ex2_1_7", "floudas-ch2", ex2_1_7, -4150.4101, "min", _ch2("ex2_1_7", "concave QP, 20 variables"),
             late=True),
    Instance("ex2_1_10", "floudas-ch2", ex2_1_10, 49318.018, "min",
             _ch2("ex2_1_10", "indefinite separable QP, 20 variables"), late=True),
    Instance("ex3_1_3", "floudas-ch3", ex3_1_3, -310.0, "min",
             HANDBOOK + ", chapter 3, quadratically constrained problems (concave objective, reverse-convex rows); "
             "model and optimum as in GLOBALLib/MINLPLib ex3_1_3 (as generated in YALMIP's global test suite, "
             "test_global_ex3_1_3.m)", late=True),
    Instance("st_bsj4", "bilinear", st_bsj4, -70262.051056, "min",
             "GLOBALLib/MINLPLib model st_bsj4 (Sahinidis group test collection; model and bounds as in the "
             "MINLPLib model files); optimum certified by SCIP 10 (gap 0)", optimum_source="SCIP 10, gap 0",
             late=True),
    Instance("st_e24", "bilinear", st_e24, 3.0, "min",
             "GLOBALLib/MINLPLib model st_e24 (Sahinidis group test collection; model as in the MINLPLib model "
             "files); optimum certified by SCIP 10 (gap 0)", optimum_source="SCIP 10, gap 0", late=True),
]

# outside GOP's class: gop's mode='auto' refuses these by name (issue 11's bad-input rule), the user asks for the
# spatial tree, which certifies them over the McCormick relaxation
for _inst in INSTANCES:
    _inst.options = {"mode": "tree"}


# Written the way MINLPLib writes them (a free objvar, the objective moved into a row objvar == f(x)); under
# mode='auto' that nonlinear equality sends them to gop's tree. Each exposed a tree bug (docs/gop.md §12b).

def _objvar_model(n, lb, ub):
    m = pyo.ConcreteModel()
    m.objvar = pyo.Var()
    m.x = pyo.Var(pyo.RangeSet(1, n), bounds=(lb, ub))
    m.obj = pyo.Objective(expr=m.objvar)
    return m


def st_cqpjk2():
    """GLOBALLib ``st_cqpjk2``: a separable convex QP on the unit cube, through ``objvar == f(x)``."""
    m = _objvar_model(3, 0, 1)
    x = m.x
    m.e1 = pyo.Constraint(expr=x[1] + x[2] + x[3] <= 1.0e10)
    m.e2 = pyo.Constraint(expr=-(9 * x[1] * x[1] - 15 * x[1] + 9 * x[2] * x[2] - 12 * x[2] + 9 * x[3] * x[3]
                                 - 9 * x[3]) + m.objvar == 0)
    return m


def st_qpc_m0():
    """GLOBALLib ``st_qpc-m0``: a concave QP in two variables bounded only through two rows jointly."""
    m = _objvar_model(2, 0, None)
    x = m.x
    m.e1 = pyo.Constraint(expr=x[1] - 4 * x[2] >= -8)
    m.e2 = pyo.Constraint(expr=-3 * x[1] + x[2] >= -9)
    m.e3 = pyo.Constraint(expr=-(2 * x[1] - x[1] * x[1] - x[2] * x[2] + 4 * x[2]) + m.objvar == 0)
    return m


def st_z():
    """GLOBALLib ``st_z``: a concave QP in three variables, two of them free, bounded through five rows."""
    m = _objvar_model(3, None, None)
    x = m.x
    x[2].setlb(0)
    m.e1 = pyo.Constraint(expr=x[1] + x[2] - x[3] <= 0)
    m.e2 = pyo.Constraint(expr=-x[1] + x[2] - x[3] <= 0)
    m.e3 = pyo.Constraint(expr=12 * x[1] + 5 * x[2] + 12 * x[3] <= 22.8)
    m.e4 = pyo.Constraint(expr=12 * x[1] + 12 * x[2] + 7 * x[3] <= 17.1)
    m.e5 = pyo.Constraint(expr=-6 * x[1] + x[2] + x[3] <= 1.9)
    m.e6 = pyo.Constraint(expr=-(-x[1] ** 2 - x[2] ** 2 - x[3] ** 2 + 2 * x[3]) + m.objvar == 0)
    return m


_MLIB = ("GLOBALLib/MINLPLib model {} (Sahinidis group test collection), written as in the MINLPLib model files "
         "(objvar row); optimum as listed in MINLPLib")

INSTANCES += [
    Instance("st_cqpjk2", "bilinear", st_cqpjk2, -12.5, "min", _MLIB.format("st_cqpjk2"), late=True),
    Instance("st_qpc-m0", "bilinear", st_qpc_m0, -5.0, "min", _MLIB.format("st_qpc-m0"), late=True),
    Instance("st_z", "bilinear", st_z, 0.0, "min", _MLIB.format("st_z"), late=True),
]
