"""Data of the classic standard pooling problems (Haverly, Ben-Tal, Foulds, Adhya, RT2).

Transcribed from the unified data of Tawarmalani & Sahinidis (2002), "Convexification and
global optimization of the pooling problem" (Math. Program. 93:247-263), as coded in the GAMS
model library model POOL (SEQ=254) and in the JSON instance files of the Imperial College
``pooling-network`` package (Ceccon & Misener 2020).  Each record:

``comps``    {component: (availability upper bound, unit cost, [qualities])}
``prods``    {product: (demand lower, demand upper, unit price, [quality lower] or None, [quality upper])}
``pools``    {pool: capacity}
``xarcs``    [(component, pool)]            -- component -> pool arcs (fraction bound 1)
``yarcs``    {(pool, product): upper bound} -- pool -> product arcs
``zarcs``    {(component, product): bound}  -- component -> product (bypass) arcs
``optimum``  the published global minimum of cost - revenue
``origin``   the original publication of the instance
"""

_TS = ("optimum from Tawarmalani & Sahinidis (2002), Math. Program. 93:247-263, table of pooling "
       "test problems; data as in GAMS model library POOL (SEQ=254)")

HAVERLY = ("Haverly (1978), 'Studies of the behavior of recursion for the pooling problem', "
           "ACM SIGMAP Bulletin 25:19-28")
BENTAL = ("Ben-Tal, Eiger & Gershovitz (1994), 'Global minimization by reducing the duality gap', "
          "Math. Program. 63:193-212")
FOULDS = ("Foulds, Haugland & Jornsten (1992), 'A bilinear approach to the pooling problem', "
          "Optimization 24:165-180")
ADHYA = ("Adhya, Tawarmalani & Sahinidis (1999), 'A Lagrangian approach to the pooling problem', "
         "Ind. Eng. Chem. Res. 38:1956-1972")
RT = ("Audet, Brimberg, Hansen, Le Digabel & Mladenovic (2004), 'Pooling problem: alternate "
      "formulations and solution methods', Management Science 50:761-776 (instance RT2)")


def _haverly(case):
    cap = 800.0 if case == 2 else 300.0
    d1 = 600.0 if case == 2 else 100.0
    return dict(
        comps={"c1": (cap, 6.0, [3.0]), "c2": (cap, 13.0 if case == 3 else 16.0, [1.0]), "c3": (cap, 10.0, [2.0])},
        prods={"p1": (0.0, d1, 9.0, None, [2.5]), "p2": (0.0, 200.0, 15.0, None, [1.5])},
        pools={"o1": cap},
        xarcs=[("c1", "o1"), ("c2", "o1")],
        yarcs={("o1", "p1"): d1, ("o1", "p2"): 200.0},
        zarcs={("c3", "p1"): d1, ("c3", "p2"): 200.0},
        optimum={1: -400.0, 2: -600.0, 3: -750.0}[case],
        origin=HAVERLY + f", case {case}; " + _TS)


BENTAL4 = dict(
    comps={"c1": (300.0, 6.0, [3.0]), "c2": (50.0, 15.0, [1.0]), "c3": (300.0, 16.0, [1.0]),
           "c4": (300.0, 10.0, [2.0])},
    prods={"p1": (0.0, 100.0, 9.0, None, [2.5]), "p2": (0.0, 200.0, 15.0, None, [1.5])},
    pools={"o1": 300.0},
    xarcs=[("c1", "o1"), ("c2", "o1"), ("c3", "o1")],
    yarcs={("o1", "p1"): 100.0, ("o1", "p2"): 200.0},
    zarcs={("c4", "p1"): 100.0, ("c4", "p2"): 200.0},
    optimum=-450.0, origin=BENTAL + ", example 4; " + _TS)

_B5Q = {"A": (6.0, [3.0, 1.0]), "B": (16.0, [1.0, 3.0]), "C": (15.0, [1.2, 5.0]), "D": (12.0, [1.5, 2.5])}
BENTAL5 = dict(
    comps={**{f"c{4 * o + k + 1}": (600.0, _B5Q[t][0], _B5Q[t][1]) for o in range(3) for k, t in enumerate("ABCD")},
           "c13": (600.0, 10.0, [2.0, 2.5])},
    prods={"p1": (0.0, 100.0, 18.0, None, [2.5, 2.0]), "p2": (0.0, 200.0, 15.0, None, [1.5, 2.5]),
           "p3": (0.0, 100.0, 19.0, None, [2.0, 2.6]), "p4": (0.0, 100.0, 16.0, None, [2.0, 2.0]),
           "p5": (0.0, 100.0, 14.0, None, [2.0, 2.0])},
    pools={"o1": 600.0, "o2": 600.0, "o3": 600.0},
    xarcs=[(f"c{4 * o + k + 1}", f"o{o + 1}") for o in range(3) for k in range(4)],
    yarcs={**{("o1", p): b for p, b in zip(["p1", "p2", "p3", "p4", "p5"], [100, 200, 100, 100, 100])},
           **{("o2", p): b for p, b in zip(["p1", "p2", "p3", "p4", "p5"], [100, 100, 100, 200, 100])},
           **{("o3", p): b for p, b in zip(["p1", "p2", "p3", "p4", "p5"], [200, 100, 100, 100, 100])}},
    zarcs={("c13", p): b for p, b in zip(["p1", "p2", "p3", "p4", "p5"], [100, 200, 100, 100, 100])},
    optimum=-3500.0, origin=BENTAL + ", example 5; " + _TS)

FOULDS2 = dict(
    comps={"c1": (600.0, 6.0, [3.0]), "c2": (600.0, 16.0, [1.0]), "c3": (600.0, 10.0, [2.0]),
           "c4": (600.0, 3.0, [3.5]), "c5": (600.0, 13.0, [1.5]), "c6": (600.0, 7.0, [2.5])},
    prods={"p1": (0.0, 100.0, 9.0, None, [2.5]), "p2": (0.0, 200.0, 15.0, None, [1.5]),
           "p3": (0.0, 100.0, 6.0, None, [3.0]), "p4": (0.0, 200.0, 12.0, None, [2.0])},
    pools={"o1": 600.0, "o2": 600.0},
    xarcs=[("c1", "o1"), ("c2", "o1"), ("c4", "o2"), ("c5", "o2")],
    yarcs={(o, p): b for o in ("o1", "o2") for p, b in zip(["p1", "p2", "p3", "p4"], [100, 200, 100, 200])},
    zarcs={(c, p): b for c in ("c3", "c6") for p, b in zip(["p1", "p2", "p3", "p4"], [100, 200, 100, 200])},
    optimum=-1100.0, origin=FOULDS + ", problem 2; " + _TS)

# Foulds 3-5: one quality; 16 products p_j (demand <= 1, price 20.5 - 0.5 j, quality <= 1 + 0.05 j);
# 8 pools of capacity 16, every pool feeds every product (arc bound 16); availability 16.
_F_PRODS = {f"p{j}": (0.0, 1.0, 20.5 - 0.5 * j, None, [round(1.0 + 0.05 * j, 2)]) for j in range(1, 17)}
_F_POOLS = {f"o{o}": 16.0 for o in range(1, 9)}
_F_YARCS = {(f"o{o}", f"p{j}"): 16.0 for o in range(1, 9) for j in range(1, 17)}
# Foulds 4 and 5: 11 components c_k, price 21 - k, quality 0.9 + 0.1 k, each feeding several pools
_F11 = {f"c{k}": (16.0, 21.0 - k, [round(0.9 + 0.1 * k, 1)]) for k in range(1, 12)}
FOULDS3 = dict(
    # 32 components, four per pool: c_{4(o-1)+i} feeds pool o, price 20 - (o-1) - (i-1), quality 1 + 0.1 ((o-1) + (i-1))
    comps={f"c{4 * (o - 1) + i}": (16.0, 20.0 - (o - 1) - (i - 1), [round(1.0 + 0.1 * ((o - 1) + (i - 1)), 1)])
           for o in range(1, 9) for i in range(1, 5)},
    prods=_F_PRODS, pools=_F_POOLS,
    xarcs=[(f"c{4 * (o - 1) + i}", f"o{o}") for o in range(1, 9) for i in range(1, 5)],
    yarcs=_F_YARCS, zarcs={}, optimum=-8.0, origin=FOULDS + ", problem 3; " + _TS)
_F4_FEEDS = {1: (1,), 2: (2, 3), 3: (3, 4, 5), 4: (1, 4, 6, 7), 5: (2, 3, 5, 8), 6: (3, 4, 5, 6), 7: (1, 4, 6, 7),
             8: (2, 5, 7, 8), 9: (6, 7, 8), 10: (1, 8), 11: (2,)}
_F5_FEEDS = {1: (1, 7), 2: (1, 3, 7), 3: (1, 3, 7), 4: (1, 3, 5, 7), 5: (3, 5, 8), 6: (5, 8), 7: (4, 5, 8),
             8: (2, 4, 6, 8), 9: (2, 4, 6), 10: (2, 4, 6), 11: (2, 6)}
FOULDS4 = dict(comps=_F11, prods=_F_PRODS, pools=_F_POOLS,
               xarcs=[(f"c{k}", f"o{o}") for k, os_ in _F4_FEEDS.items() for o in os_],
               yarcs=_F_YARCS, zarcs={}, optimum=-8.0, origin=FOULDS + ", problem 4; " + _TS)
FOULDS5 = dict(FOULDS4, xarcs=[(f"c{k}", f"o{o}") for k, os_ in _F5_FEEDS.items() for o in os_],
               origin=FOULDS + ", problem 5; " + _TS)

_AD_COMPS6 = {"c1": (75.0, 7.0, [1.0, 6.0, 4.0, 0.5, 5.0, 9.0]), "c2": (75.0, 3.0, [4.0, 1.0, 3.0, 2.0, 4.0, 4.0]),
              "c3": (75.0, 2.0, [4.0, 5.5, 3.0, 0.9, 7.0, 10.0]), "c4": (75.0, 10.0, [3.0, 3.0, 3.0, 1.0, 3.0, 4.0]),
              "c5": (75.0, 5.0, [1.0, 2.7, 4.0, 1.6, 3.0, 7.0])}
_AD_PRODS6 = {"p1": (0.0, 10.0, 16.0, None, [3.0, 3.0, 3.25, 0.75, 6.0, 5.0]),
              "p2": (0.0, 25.0, 25.0, None, [4.0, 2.5, 3.5, 1.5, 7.0, 6.0]),
              "p3": (0.0, 30.0, 15.0, None, [1.5, 5.5, 3.9, 0.8, 7.0, 6.0]),
              "p4": (0.0, 10.0, 10.0, None, [3.0, 4.0, 4.0, 1.8, 8.0, 6.0])}
_P4 = ["p1", "p2", "p3", "p4"]
_AD12_Y = {**{("o1", p): b for p, b in zip(_P4, [10, 25, 30, 10])},
           **{("o2", p): b for p, b in zip(_P4, [30, 10, 10, 25])}}


def _first4(d):
    """Keep the first four qualities (adhya1 is adhya2 restricted to qualities 1-4)."""
    return {k: v[:-1] + (v[-1][:4],) for k, v in d.items()}


ADHYA1 = dict(comps=_first4(_AD_COMPS6), prods=_first4(_AD_PRODS6), pools={"o1": 75.0, "o2": 75.0},
              xarcs=[("c1", "o1"), ("c2", "o1"), ("c3", "o2"), ("c4", "o2"), ("c5", "o2")],
              yarcs=_AD12_Y, zarcs={}, optimum=-549.80305, origin=ADHYA + ", problem 1; " + _TS)
ADHYA2 = dict(ADHYA1, comps=_AD_COMPS6, prods=_AD_PRODS6, origin=ADHYA + ", problem 2; " + _TS)
ADHYA3 = dict(
    comps={**_AD_COMPS6, "c6": (75.0, 5.0, [1.8, 2.7, 4.0, 3.5, 6.1, 3.0]),
           "c7": (75.0, 9.0, [5.0, 1.0, 1.7, 2.9, 3.5, 2.9]), "c8": (75.0, 11.0, [3.0, 3.0, 3.0, 1.0, 5.0, 2.0])},
    prods=_AD_PRODS6, pools={"o1": 75.0, "o2": 75.0, "o3": 75.0},
    xarcs=[("c1", "o1"), ("c2", "o1"), ("c3", "o2"), ("c4", "o2"), ("c5", "o2"), ("c6", "o3"), ("c7", "o3"),
           ("c8", "o3")],
    yarcs={**{("o1", p): b for p, b in zip(_P4, [10, 25, 30, 10])},
           **{("o2", p): b for p, b in zip(_P4, [10, 10, 25, 30])},
           **{("o3", p): b for p, b in zip(_P4, [30, 10, 10, 25])}},
    zarcs={}, optimum=-561.044687, origin=ADHYA + ", problem 3; " + _TS)
_P5 = ["p1", "p2", "p3", "p4", "p5"]
ADHYA4 = dict(
    comps={"c1": (85.0, 15.0, [0.5, 1.9, 1.3, 1.0]), "c2": (85.0, 7.0, [1.4, 1.8, 1.7, 1.6]),
           "c3": (85.0, 4.0, [1.2, 1.9, 1.4, 1.4]), "c4": (85.0, 5.0, [1.5, 1.2, 1.7, 1.3]),
           "c5": (85.0, 6.0, [1.6, 1.8, 1.6, 2.0]), "c6": (85.0, 3.0, [1.2, 1.1, 1.4, 2.0]),
           "c7": (85.0, 5.0, [1.5, 1.5, 1.5, 1.5]), "c8": (85.0, 5.0, [1.4, 1.6, 1.2, 1.6])},
    prods={"p1": (0.0, 15.0, 10.0, None, [1.2, 1.7, 1.4, 1.7]), "p2": (0.0, 25.0, 25.0, None, [1.4, 1.3, 1.8, 1.4]),
           "p3": (0.0, 10.0, 30.0, None, [1.3, 1.3, 1.9, 1.9]), "p4": (0.0, 20.0, 6.0, None, [1.2, 1.1, 1.7, 1.6]),
           "p5": (0.0, 15.0, 10.0, None, [1.6, 1.9, 2.0, 2.5])},
    pools={"o1": 85.0, "o2": 85.0},
    xarcs=[(f"c{k}", "o1") for k in range(1, 5)] + [(f"c{k}", "o2") for k in range(5, 9)],
    yarcs={**{("o1", p): b for p, b in zip(_P5, [15, 25, 10, 20, 15])},
           **{("o2", p): b for p, b in zip(_P5, [10, 20, 15, 15, 25])}},
    zarcs={}, optimum=-877.64574, origin=ADHYA + ", problem 4; " + _TS)

_P3 = ["p1", "p2", "p3"]
RT2 = dict(
    comps={"c1": (60.9756, 49.2, [0.82, 3.0, 99.2, 90.5]), "c2": (161.29, 62.0, [0.62, 0.0, 87.9, 83.5]),
           "c3": (5.0, 300.0, [0.75, 0.0, 114.0, 98.7])},
    prods={"p1": (5.0, 300.0, 190.0, [0.74, 0.0, 95.0, 85.0], [0.79, 3.0, 114.0, 98.7]),
           "p2": (5.0, 300.0, 230.0, [0.74, 0.0, 96.0, 88.0], [0.79, 0.9, 114.0, 98.7]),
           "p3": (5.0, 300.0, 150.0, [0.74, 0.0, 91.0, 83.5], [0.79, 3.0, 114.0, 98.7])},
    pools={"o1": 12.5, "o2": 17.5},
    xarcs=[(c, o) for c in ("c1", "c2", "c3") for o in ("o1", "o2")],
    yarcs={**{("o1", p): 12.5 for p in _P3}, **{("o2", p): 17.5 for p in _P3}},
    zarcs={("c1", "p1"): 0.0, ("c1", "p2"): 7.5, ("c1", "p3"): 0.0, ("c2", "p1"): 161.29, ("c2", "p2"): 0.0,
           ("c2", "p3"): 161.29, ("c3", "p1"): 7.5, ("c3", "p2"): 0.0, ("c3", "p3"): 0.0},
    optimum=-4391.8258928, origin=RT + "; " + _TS)

POOLING = {"haverly1": _haverly(1), "haverly2": _haverly(2), "haverly3": _haverly(3), "bental4": BENTAL4,
           "bental5": BENTAL5, "foulds2": FOULDS2, "adhya1": ADHYA1, "adhya2": ADHYA2, "adhya3": ADHYA3,
           "adhya4": ADHYA4, "rt2": RT2}
#: added after the held-out rule was fixed: held out by construction (never tuned on)
POOLING_LATE = {"foulds3": FOULDS3, "foulds4": FOULDS4, "foulds5": FOULDS5}
