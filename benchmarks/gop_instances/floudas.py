"""Bilinear problems of Floudas et al., *Handbook of Test Problems in Local and Global Optimization* (1999).

Coded from the Handbook's statements as distributed in GLOBALLib / MINLPLib (model
``exN_M_K`` of GLOBALLib is a test problem of Handbook chapter N); variables are ``x[1..n]`` as there,
nonnegative unless the source gives other bounds, and the optimum is the one listed in the
Handbook and in MINLPLib.
"""
from __future__ import annotations

import pyomo.environ as pyo

from . import Instance

HANDBOOK = ("Floudas, Pardalos, Adjiman, Esposito, Gumus, Harding, Klepeis, Meyer & Schweiger (1999), "
            "Handbook of Test Problems in Local and Global Optimization, Kluwer")


def _model(n, bounds):
    """``x[1..n] >= 0`` with ``bounds = {i: (lo, up)}`` overriding."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(pyo.RangeSet(1, n), bounds=lambda m, i: bounds.get(i, (0, None)))
    return m


def ex3_1_1():
    """Heat exchanger network design (Hock & Schittkowski problem 106), Handbook chapter 3."""
    m = _model(8, {1: (100, 10000), 2: (1000, 10000), 3: (1000, 10000),
                   **{i: (10, 1000) for i in range(4, 9)}})
    x = m.x
    m.obj = pyo.Objective(expr=x[1] + x[2] + x[3])
    m.c1 = pyo.Constraint(expr=0.0025 * (x[4] + x[6]) <= 1)
    m.c2 = pyo.Constraint(expr=0.0025 * (-x[4] + x[5] + x[7]) <= 1)
    m.c3 = pyo.Constraint(expr=0.01 * (-x[5] + x[8]) <= 1)
    m.c4 = pyo.Constraint(expr=100 * x[1] - x[1] * x[6] + 833.33252 * x[4] <= 83333.333)
    m.c5 = pyo.Constraint(expr=x[2] * x[4] - x[2] * x[7] - 1250 * x[4] + 1250 * x[5] <= 0)
    m.c6 = pyo.Constraint(expr=x[3] * x[5] - x[3] * x[8] - 2500 * x[5] + 1250000 <= 0)
    return m


def ex5_4_2():
    """Heat exchanger network (three exchangers in series), Handbook chapter 5."""
    m = _model(8, {1: (100, 10000), 2: (1000, 10000), 3: (1000, 10000),
                   **{i: (10, 1000) for i in range(4, 9)}})
    x = m.x
    m.obj = pyo.Objective(expr=x[1] + x[2] + x[3])
    m.c1 = pyo.Constraint(expr=x[4] + x[6] <= 400)
    m.c2 = pyo.Constraint(expr=-x[4] + x[5] + x[7] <= 300)
    m.c3 = pyo.Constraint(expr=-x[5] + x[8] <= 100)
    m.c4 = pyo.Constraint(expr=x[1] - x[1] * x[6] + 833.333333333333 * x[4] <= 83333.3333333333)
    m.c5 = pyo.Constraint(expr=x[2] * x[4] - x[2] * x[7] - 1250 * x[4] + 1250 * x[5] <= 0)
    m.c6 = pyo.Constraint(expr=x[3] * x[5] - x[3] * x[8] - 2500 * x[5] <= -1250000)
    return m


def ex5_2_2(case):
    """Haverly's pooling problem in the Handbook's formulation (chapter 5, cases 1-3).

    x1, x2: products X, Y; x3, x4: crudes A, B into the pool; x5, x6: crude C to X, Y;
    x7: pool sulphur quality; x8, x9: pool to X, Y.
    """
    m = _model(9, {1: (0, 600 if case == 2 else 100), 2: (0, 200), **{i: (0, 500) for i in range(3, 10)}})
    x = m.x
    cost_b = 13 if case == 3 else 16
    m.obj = pyo.Objective(expr=-9 * x[1] - 15 * x[2] + 6 * x[3] + cost_b * x[4] + 10 * x[5] + 10 * x[6])
    m.pool = pyo.Constraint(expr=x[3] + x[4] == x[8] + x[9])
    m.prod_x = pyo.Constraint(expr=x[1] == x[5] + x[8])
    m.prod_y = pyo.Constraint(expr=x[2] == x[6] + x[9])
    m.spec_x = pyo.Constraint(expr=x[7] * x[8] + 2 * x[5] <= 2.5 * x[1])
    m.spec_y = pyo.Constraint(expr=x[7] * x[9] + 2 * x[6] <= 1.5 * x[2])
    m.sulphur = pyo.Constraint(expr=x[7] * x[8] + x[7] * x[9] == 3 * x[3] + x[4])
    return m


def ex5_3_2():
    """Distillation column sequencing (pooling of split streams), Handbook chapter 5."""
    m = _model(22, {**{i: (0, 300) for i in range(1, 19)}, **{i: (0, 1) for i in range(19, 23)}})
    x = m.x
    m.obj = pyo.Objective(expr=0.00432 * x[1] + 0.01517 * x[2] + 0.01517 * x[9] + 0.00432 * x[13] + 0.9979)
    m.c1 = pyo.Constraint(expr=x[1] + x[2] + x[3] + x[4] == 300)
    m.c2 = pyo.Constraint(expr=x[5] - x[6] - x[7] == 0)
    m.c3 = pyo.Constraint(expr=x[8] - x[9] - x[10] - x[11] == 0)
    m.c4 = pyo.Constraint(expr=x[12] - x[13] - x[14] - x[15] == 0)
    m.c5 = pyo.Constraint(expr=x[16] - x[17] - x[18] == 0)
    m.c6 = pyo.Constraint(expr=0.333 * x[1] - x[5] + x[13] * x[21] == 0)
    m.c7 = pyo.Constraint(expr=0.333 * x[1] - x[8] * x[20] + x[13] * x[22] == 0)
    m.c8 = pyo.Constraint(expr=0.333 * x[1] - x[8] * x[19] == 0)
    m.c9 = pyo.Constraint(expr=-0.333 * x[2] - x[12] * x[21] == 0)
    m.c10 = pyo.Constraint(expr=0.333 * x[2] + x[9] * x[20] - x[12] * x[22] == 0)
    m.c11 = pyo.Constraint(expr=0.333 * x[2] - x[16] + x[9] * x[19] == 0)
    m.c12 = pyo.Constraint(expr=0.333 * x[3] + x[6] + x[14] * x[21] == 30)
    m.c13 = pyo.Constraint(expr=0.333 * x[3] + x[10] * x[20] + x[14] * x[22] == 50)
    m.c14 = pyo.Constraint(expr=0.333 * x[3] + x[17] + x[10] * x[19] == 30)
    m.c15 = pyo.Constraint(expr=x[19] + x[20] == 1)
    m.c16 = pyo.Constraint(expr=x[21] + x[22] == 1)
    return m


_GL = "; model and optimum as in GLOBALLib/MINLPLib "

def ex5_2_4():
    """Ben-Tal et al.'s example 4 pooling problem in the Handbook's PQ form (chapter 5): pool fractions
    x1..x3 (sum 1), pool-to-product flows x4, x5, bypass flows x6, x7."""
    m = _model(7, {1: (0, 1), 2: (0, 1), 3: (0, 1), 4: (0, 100), 5: (0, 200), 6: (0, 100), 7: (0, 200)})
    x = m.x
    m.obj = pyo.Objective(expr=-((9 - 6 * x[1] - 16 * x[2] - 15 * x[3]) * x[4]
                                 + (15 - 6 * x[1] - 16 * x[2] - 15 * x[3]) * x[5]) + x[6] - 5 * x[7])
    m.c1 = pyo.Constraint(expr=x[3] * x[4] + x[3] * x[5] <= 50)
    m.c2 = pyo.Constraint(expr=x[4] + x[6] <= 100)
    m.c3 = pyo.Constraint(expr=x[5] + x[7] <= 200)
    m.c4 = pyo.Constraint(expr=(3 * x[1] + x[2] + x[3] - 2.5) * x[4] - 0.5 * x[6] <= 0)
    m.c5 = pyo.Constraint(expr=(3 * x[1] + x[2] + x[3] - 1.5) * x[5] + 0.5 * x[7] <= 0)
    m.c6 = pyo.Constraint(expr=x[1] + x[2] + x[3] == 1)
    return m


def house():
    """GLOBALLib ``house`` (floor-plan design): maximise two areas under shape rows; x1..x3, x5, x7, x8
    have no bounds of their own (they follow from x4, x6 and the rows)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(pyo.RangeSet(1, 8))
    x = m.x
    x[4].setlb(40); x[4].setub(68); x[6].setlb(56); x[6].setub(100); x[7].setub(3000)
    m.obj = pyo.Objective(expr=-x[7] - x[8])
    m.c1 = pyo.Constraint(expr=-(x[1] * x[2] + x[5] * x[4]) + x[7] == 0)
    m.c2 = pyo.Constraint(expr=-x[1] * x[3] + x[8] == 0)
    m.c3 = pyo.Constraint(expr=-x[2] - x[5] + x[6] == 0)
    m.c4 = pyo.Constraint(expr=x[1] - x[4] / 3 >= 0)
    m.c5 = pyo.Constraint(expr=x[1] - 0.5 * x[4] <= 0)
    m.c6 = pyo.Constraint(expr=x[2] * (x[4] - x[1]) >= 1500)
    m.c7 = pyo.Constraint(expr=-0.5 * x[2] + x[3] - x[5] == 0)
    m.c8 = pyo.Constraint(expr=-0.5 * x[2] + x[5] >= 0)
    return m


def ex3_1_2():
    """Handbook 3.1.2 (Colville's / Himmelblau's problem, Hock & Schittkowski 83 in bilinear form): bilinear
    objective with a convex square, six bilinear rows with squares of both signs."""
    m = _model(5, {1: (78, 102), 2: (33, 45), 3: (27, 45), 4: (27, 45), 5: (27, 45)})
    x = m.x
    m.obj = pyo.Objective(expr=0.8356891 * x[1] * x[5] + 37.293239 * x[1] + 5.3578547 * x[3] * x[3] - 40792.141)
    m.c1 = pyo.Constraint(expr=0.0056858 * x[2] * x[5] - 0.0022053 * x[3] * x[5] + 0.0006262 * x[1] * x[4] <= 6.665593)
    m.c2 = pyo.Constraint(expr=0.0022053 * x[3] * x[5] - 0.0056858 * x[2] * x[5] - 0.0006262 * x[1] * x[4] <= 85.334407)
    m.c3 = pyo.Constraint(expr=0.0071317 * x[2] * x[5] + 0.0021813 * x[3] * x[3] + 0.0029955 * x[1] * x[2] <= 29.48751)
    m.c4 = pyo.Constraint(expr=-0.0071317 * x[2] * x[5] - 0.0021813 * x[3] * x[3] - 0.0029955 * x[1] * x[2] <= -9.48751)
    m.c5 = pyo.Constraint(expr=0.0047026 * x[3] * x[5] + 0.0019085 * x[3] * x[4] + 0.0012547 * x[1] * x[3] <= 15.599039)
    m.c6 = pyo.Constraint(expr=-0.0047026 * x[3] * x[5] - 0.0019085 * x[3] * x[4] - 0.0012547 * x[1] * x[3]
                          <= -10.699039)
    return m


def ex3_1_4():
    """Handbook 3.1.4: linear objective over a polytope and one indefinite quadratic row, written as
    products of variables with affine factors; x2 is bounded only through the rows."""
    m = _model(3, {1: (0, 2), 3: (0, 3)})
    x = m.x
    m.obj = pyo.Objective(expr=-2 * x[1] + x[2] - x[3])
    m.q = pyo.Constraint(expr=x[1] * (4 * x[1] - 2 * x[2] + 2 * x[3]) + x[2] * (2 * x[2] - 2 * x[1] - x[3])
                         + x[3] * (2 * x[1] - x[2] + 2 * x[3]) - 20 * x[1] + 9 * x[2] - 13 * x[3] >= -24)
    m.c1 = pyo.Constraint(expr=x[1] + x[2] + x[3] <= 4)
    m.c2 = pyo.Constraint(expr=3 * x[2] + x[3] <= 6)
    return m


INSTANCES = [
    Instance("ex3_1_1", "floudas-ch3", ex3_1_1, 7049.24802, "min",
             HANDBOOK + ", chapter 3, quadratically constrained problems (Hock & Schittkowski 1981, problem 106)" + _GL + "ex3_1_1"),
    Instance("ex5_2_2_case1", "floudas-ch5", ex5_2_2, -400.0, "min",
             HANDBOOK + ", chapter 5, pooling problem case 1 (Haverly 1978)" + _GL + "ex5_2_2_case1", args=(1,)),
    Instance("ex5_2_2_case2", "floudas-ch5", ex5_2_2, -600.0, "min",
             HANDBOOK + ", chapter 5, pooling problem case 2 (Haverly 1978)" + _GL + "ex5_2_2_case2", args=(2,)),
    Instance("ex5_2_2_case3", "floudas-ch5", ex5_2_2, -750.0, "min",
             HANDBOOK + ", chapter 5, pooling problem case 3 (Haverly 1978)" + _GL + "ex5_2_2_case3", args=(3,)),
    Instance("ex5_3_2", "floudas-ch5", ex5_3_2, 1.86416, "min",
             HANDBOOK + ", chapter 5, distillation sequencing" + _GL + "ex5_3_2"),
    Instance("ex5_4_2", "floudas-ch5", ex5_4_2, 7512.2259, "min",
             HANDBOOK + ", chapter 5, heat exchanger network design" + _GL + "ex5_4_2"),
    # added after the held-out rule was fixed: held out by construction (never tuned on)
    Instance("ex5_2_4", "floudas-ch5", ex5_2_4, -450.0, "min",
             HANDBOOK + ", chapter 5, pooling problem (Ben-Tal et al. 1994, example 4)" + _GL + "ex5_2_4",
             late=True),
    Instance("house", "floudas-ch5", house, -4500.0, "min",
             "GLOBALLib model house (floor-plan design; GAMS World GLOBALLib collection, as generated in "
             "YALMIP's global test suite, test_global_house.m); optimum as listed there", late=True),
    Instance("ex3_1_2", "floudas-ch3", ex3_1_2, -30665.53867, "min",
             HANDBOOK + ", chapter 3, quadratically constrained problems (Colville / Himmelblau)" + _GL + "ex3_1_2"
             + " (as generated in YALMIP's global test suite, test_global_ex3_1_2.m)", late=True),
    Instance("ex3_1_4", "floudas-ch3", ex3_1_4, -4.0, "min",
             HANDBOOK + ", chapter 3, quadratically constrained problems" + _GL + "ex3_1_4"
             + " (as generated in YALMIP's global test suite, test_global_ex3_1_4.m)", late=True),
]
