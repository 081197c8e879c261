"""A public collection of bilinear / biconvex test instances with published global optima.

Every instance is a Pyomo model builder coded from the literature (the source is recorded
with the instance), written the way a Pyomo user writes it: products of variables appear as
they do in the publication, bounds are the published ones (many variables are bounded only
through the constraints, as published), and the objective sense is the published one.

Each :class:`Instance` records

* ``name`` -- a short identifier (MINLPLib / GLOBALLib names where one exists);
* ``family`` -- ``pooling-p``, ``pooling-pq``, ``floudas-ch2`` (concave / indefinite QPs, module
  ``concave``), ``floudas-ch3``, ``floudas-ch5``, ``floudas-ch9``, ``bilinear`` or ``multiconvex``;
* ``source`` -- authors, year, publication and table/page of the problem, and where the
  optimum comes from;
* ``optimum`` and ``sense`` (``"min"``/``"max"``) -- the published global optimum (for the
  tiny multi-convex instances, which have none, the value SCIP 10 certified with gap 0,
  said so in ``source``);
* ``heldout`` -- set by :func:`heldout_rule`, a fixed rule on the sorted instance list (every
  third instance, positions 2, 5, 8, ... of the list sorted by ``(family, name)``); held-out
  instances are reported separately and are not to be tuned on. Instances added after the solver
  work they check (``late=True``) are held out by construction and stay outside the positional
  rule, so adding one never moves another instance between the two sets. Instances whose objective is
  not biconvex (``concave``: the Handbook's chapter 2 QPs, ``st_e24``, ``st_bsj4``, ``ex3_1_3``) are
  certified by gop's tree (docs/gop.md §8b), not by the GOP iteration: ``mode='auto'`` refuses them by name,
  so they carry ``options = {"mode": "tree"}``, the user's explicit choice; a constant objective
  (``st_robot``) makes a feasibility problem whose optimum is 0.

``instances()`` returns the list, ``get(name)`` one instance; ``inst.build()`` returns a fresh
``ConcreteModel`` whose objective is the component ``obj``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

FAMILIES = ("pooling-p", "pooling-pq", "floudas-ch2", "floudas-ch3", "floudas-ch5", "floudas-ch9", "bilinear", "multiconvex")


@dataclass
class Instance:
    name: str
    family: str
    builder: Callable
    optimum: float
    sense: str
    source: str
    optimum_source: str = "published"
    args: tuple = ()
    heldout: bool = field(default=False)
    #: a published optimal point {variable name: value} where the source gives one (checked in tests)
    point: dict = None
    #: added after the held-out rule was fixed: always held out, not counted by the positional rule
    late: bool = False
    #: solver options the instance's user gives: ``{"mode": "tree"}`` for the programs outside GOP's class
    #: (no biconvex partition: concave or indefinite quadratics, odd cycles), which ``mode='auto'`` refuses by name
    options: dict = None

    def build(self):
        m = self.builder(*self.args)
        m.name = self.name
        return m


def heldout_rule(insts):
    """Mark every third instance (positions 2, 5, 8, ... of the list sorted by (family, name)) held out;
    ``late`` instances are held out and skipped by the count."""
    ordered = sorted(insts, key=lambda i: (i.family, i.name))
    k = 0
    for inst in ordered:
        if inst.late:
            inst.heldout = True
            continue
        inst.heldout = (k % 3 == 2)
        k += 1
    return ordered


def instances():
    from . import bilevel, bilinear, concave, floudas, multiconvex, pooling
    insts = []
    for mod in (pooling, floudas, bilevel, bilinear, multiconvex, concave):
        insts.extend(mod.INSTANCES)
    names = [i.name for i in insts]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise RuntimeError(f"duplicate instance names {sorted(dup)}")
    return heldout_rule(insts)


def get(name):
    for inst in instances():
        if inst.name == name:
            return inst
    raise KeyError(f"no instance {name!r}; known: {[i.name for i in instances()]}")
