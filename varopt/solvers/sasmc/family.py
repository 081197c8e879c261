"""The exponential family ``p(x; theta)`` of ``sasmc`` (Carbonetto 2009, §3.3.5, §3.4.1, §3.4.3).

Terms are the couplings ``x_i x_j`` and the non-zero fields ``x_i`` of the log-potential
``t(x) = const + h.x + sum_e w_e x_i x_j``. A family assigns every term to a group; one
parameter per group multiplies the sum of its terms' statistics:

* ``"edges"``: one parameter per coupling and per non-zero field (the N-parameter family);
* ``"tied"``: one parameter per distinct coefficient value (on a ±J glass: the 2-parameter
  family; on a uniform ferromagnet: the single inverse temperature of §3.3.10);
* user groups: a mapping ``{(name_i, name_j): label, name_i: label}`` or a sequence of labels
  for the terms in the order couplings (as in ``info['edges']``) then fields (sites in order).

The family contains the target iff every group's terms have one coefficient (then ``theta*_g``
is that coefficient); otherwise :class:`InvalidOptionError` names the group.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...errors import InvalidOptionError


def build_family(model, family):
    """``(ei, ej, fi, group, theta_star, labels)`` for the log-potential ``model`` (module doc)."""
    fi = np.flatnonzero(model.h != 0.0)
    coef = np.concatenate([model.w, model.h[fi]])
    names = model.names
    keys = [(names[i], names[j]) for i, j in zip(model.i.tolist(), model.j.tolist())] + [names[i] for i in fi]
    if isinstance(family, str):
        if family == "edges":
            labels = list(range(coef.size))
        elif family == "tied":
            labels = [float(c) for c in coef]
        else:
            raise InvalidOptionError(f"option 'family' must be 'edges', 'tied', a mapping or a sequence of group "
                                     f"labels (got {family!r})")
    elif isinstance(family, Mapping):
        labels = []
        for k in keys:
            key = k if k in family else (k[::-1] if isinstance(k, tuple) and k[::-1] in family else None)
            if key is None:
                what = f"coupling {k}" if isinstance(k, tuple) else f"field of {k!r}"
                raise InvalidOptionError(f"option 'family': the {what} has no group; every coupling (keyed by a "
                                         "pair of variable names) and every non-zero field (keyed by the name) "
                                         "needs one")
            labels.append(family[key])
    else:
        labels = list(family)
        if len(labels) != coef.size:
            raise InvalidOptionError(f"option 'family': {len(labels)} group labels given, the model has "
                                     f"{model.m} couplings and {fi.size} non-zero fields ({coef.size} terms)")
    uniq, group = {}, np.empty(coef.size, dtype=np.int64)
    for t, lab in enumerate(labels):
        group[t] = uniq.setdefault(lab, len(uniq))
    theta_star = np.zeros(len(uniq))
    theta_star[group] = coef
    bad = np.flatnonzero(np.abs(theta_star[group] - coef) > 1e-12 * np.maximum(1.0, np.abs(coef)))
    if bad.size:
        t = int(bad[0])
        lab = labels[t]
        vals = sorted(set(np.round(coef[group == group[t]], 12).tolist()))
        raise InvalidOptionError(f"option 'family' does not contain the target: group {lab!r} ties terms with "
                                 f"different coefficients {vals[:4]} (log-potential scale); one parameter per "
                                 "group can only recover the target when its terms share one coefficient")
    return model.i, model.j, fi, group, theta_star, list(uniq)
