"""Energy models from files of the UAI inference competitions (``.uai`` models, ``.uai.evid`` evidence).

**Format** (UAI 2008 evaluation, PASCAL2 PIC 2011, UAI 2014-2022; whitespace-separated tokens, line
breaks carry no meaning, lines starting with ``c`` are comments): the network type (``MARKOV`` or
``BAYES``), the number of variables N, N cardinalities, the number of factors F, F scopes (scope size,
then the variable indices), then F tables in the order of the scopes, each its number of entries
followed by the entries, the *last* variable of the scope changing fastest (row-major). The model is

    p~(x) = prod_f phi_f(x_f),        Z = sum_x p~(x)

(for ``BAYES`` the tables are conditional probability tables and Z = 1, or P(e) under evidence).
Evidence is one line ``k  v_1 e_1 ... v_k e_k`` (UAI 2014-2022), or the same preceded by a sample
count of 1 (PIC 2011); the two are told apart by their token count.

**To an energy model** (binary variables, scopes of at most two variables, after conditioning):
over bits, the log of a pair table ``L_ab = ln phi(x_i = a, x_j = b)`` is exactly

    ln phi(x_i, x_j) = L_00 + (L_10 - L_00) x_i + (L_01 - L_00) x_j + (L_11 - L_10 - L_01 + L_00) x_i x_j

(the four corners of {0,1}^2 determine a multilinear function uniquely), and of a unary table
``L_0 + (L_1 - L_0) x_i``. The energy is minus the sum of these, so the energy solvers at ``beta = 1``
infer ``p(x) ∝ exp(-E) = p~(x)`` and report ``log Z`` in **natural log** (UAI result files give
log10 Z: divide by ln 10). Evidence slices the tables (the observed axes are indexed by their value)
before the checks, so a factor of any size or cardinality is accepted once its unobserved part is a
binary pair; zeros in the entries left are refused (ln 0 = -inf is a hard constraint, which an energy
model cannot hold). Nothing here imports Pyomo or CVXPY.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..errors import InputDataError, ModelStructureError


class _Tokens:
    """Whitespace tokens of a UAI text with their line numbers (comment lines dropped)."""

    def __init__(self, text, what):
        self.what = what
        self.tok, self.line = [], []
        for ln, row in enumerate(text.splitlines(), start=1):
            parts = row.split()
            if parts and not parts[0].lower().startswith("c"):
                self.tok.extend(parts)
                self.line.extend([ln] * len(parts))
        self.pos = 0

    def __len__(self):
        return len(self.tok)

    def where(self, k=None):
        k = self.pos if k is None else k
        return f"{self.what}, line {self.line[k]}" if k < len(self.tok) else f"{self.what}, end of file"

    def take(self, what):
        if self.pos >= len(self.tok):
            last = f" (after line {self.line[-1]})" if self.line else ""
            raise InputDataError(f"{self.what}: the file ends{last} where {what} was expected")
        self.pos += 1
        return self.tok[self.pos - 1]

    def integer(self, what, lo=0):
        t = self.take(what)
        try:
            v = int(t)
        except ValueError:
            raise InputDataError(f"{self.where(self.pos - 1)}: {what} must be an integer, got {t!r}") from None
        if v < lo:
            raise InputDataError(f"{self.where(self.pos - 1)}: {what} must be >= {lo}, got {v}")
        return v

    def floats(self, count, what):
        start = self.pos
        if start + count > len(self.tok):
            got = len(self.tok) - start
            raise InputDataError(f"{self.what}: {what} needs {count} entries but the file ends after {got} "
                                 f"(line {self.line[-1] if self.line else 0}): truncated table")
        chunk = self.tok[start:start + count]
        try:
            vals = np.array([float(t) for t in chunk], dtype=float)
        except ValueError:
            k = next(k for k, t in enumerate(chunk) if not _is_float(t))
            raise InputDataError(f"{self.where(start + k)}: entry {k} of {what} is not a number: "
                                 f"{chunk[k]!r}") from None
        self.pos += count
        return vals, start


def _is_float(t):
    try:
        float(t)
        return True
    except ValueError:
        return False


def _read(path):
    """A file's text; ``.gz`` files (as benchmark collections ship them) are decompressed."""
    path = Path(path)
    if path.suffix == ".gz":
        import gzip
        with gzip.open(path, "rt") as f:
            return f.read()
    return path.read_text()


def _text(source, what):
    """The text of ``source``: a path (str or os.PathLike) or the file's contents."""
    if isinstance(source, os.PathLike):
        return _read(source), f"{what} {os.fspath(source)!r}"
    if not isinstance(source, str):
        raise TypeError(f"{what} must be a path or the text of the file, got {type(source).__name__}")
    if "\n" in source.strip() or not source.strip() or source.split(None, 1)[0].upper() in ("MARKOV", "BAYES"):
        return source, what
    if not os.path.exists(source):
        raise FileNotFoundError(f"{what}: no file {source!r} (text of a file must start with MARKOV or BAYES "
                                "or span several lines)")
    return _read(source), f"{what} {source!r}"


class UAIModel:
    """The parsed file: ``kind`` ('MARKOV'/'BAYES'), ``cards``, ``scopes`` (tuples), ``tables`` (arrays
    shaped by the scope's cardinalities, the last axis the last variable of the scope) and ``lines``
    (line of each table's entry count, for messages)."""

    def __init__(self, kind, cards, scopes, tables, lines, where):
        self.kind, self.cards, self.scopes, self.tables, self.lines, self.where = \
            kind, cards, scopes, tables, lines, where

    @property
    def n(self):
        return len(self.cards)


def read_uai(source) -> UAIModel:
    """Parse a UAI model (path or text); malformed input raises :class:`InputDataError` naming the line."""
    text, what = _text(source, "UAI model")
    t = _Tokens(text, what)
    kind = t.take("the network type (MARKOV or BAYES)")
    if kind.upper() not in ("MARKOV", "BAYES"):
        hint = " (sparse tables, SPARSEMARKOV/SPARSEBAYES, are not read)" if "SPARSE" in kind.upper() else ""
        raise InputDataError(f"{t.where(0)}: the network type must be MARKOV or BAYES, got {kind!r}{hint}")
    n = t.integer("the number of variables")
    cards = [t.integer(f"the cardinality of variable {v}", lo=1) for v in range(n)]
    nf = t.integer("the number of factors")
    scopes = []
    for f in range(nf):
        size = t.integer(f"the scope size of factor {f}")
        first = t.pos
        scope = tuple(t.integer(f"variable {k} of factor {f}'s scope") for k in range(size))
        bad = [v for v in scope if v >= n]
        if bad:
            raise InputDataError(f"{t.where(first)}: factor {f}'s scope names variable {bad[0]}, but the model "
                                 f"has {n} variables (0..{n - 1})")
        if len(set(scope)) < size:
            raise InputDataError(f"{t.where(first)}: factor {f}'s scope {list(scope)} repeats a variable")
        scopes.append(scope)
    tables, lines = [], []
    for f, scope in enumerate(scopes):
        lines.append(t.line[t.pos] if t.pos < len(t) else None)
        count = t.integer(f"the entry count of factor {f}'s table")
        expected = math.prod(cards[v] for v in scope)
        if count != expected:
            raise InputDataError(f"{t.where(t.pos - 1)}: factor {f}'s table has {count} entries, expected "
                                 f"{expected} (cardinalities {[cards[v] for v in scope]} of scope {list(scope)})")
        vals, start = t.floats(count, f"factor {f}'s table")
        bad = ~np.isfinite(vals) | (vals < 0)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InputDataError(f"{t.where(start + k)}: entry {k} of factor {f}'s table is {float(vals[k])!r}; "
                                 "factor entries must be finite and non-negative")
        tables.append(vals.reshape([cards[v] for v in scope]))
    if t.pos < len(t):
        raise InputDataError(f"{t.where()}: {len(t) - t.pos} tokens after the last of the {nf} tables "
                             f"(starting {t.tok[t.pos]!r}); wrong factor count or table sizes?")
    return UAIModel(kind.upper(), cards, scopes, tables, lines, what)


def read_evidence(source, cards) -> dict:
    """``{variable: value}`` from a UAI evidence file (path or text) or a dict / sequence of pairs."""
    if isinstance(source, dict):
        pairs, what = list(source.items()), "evidence"
    elif isinstance(source, (str, os.PathLike)):
        if isinstance(source, str) and not os.path.exists(source) and _is_evidence_text(source):
            text, what = source, "UAI evidence"
        elif isinstance(source, str) and not os.path.exists(source):
            raise FileNotFoundError(f"UAI evidence: no file {source!r} (and the string is not evidence text)")
        else:
            text, what = _read(source), f"UAI evidence {os.fspath(source)!r}"
        t = _Tokens(text, what)
        pairs = _evidence_pairs(t)
    else:
        try:
            pairs, what = [tuple(p) for p in source], "evidence"
        except TypeError:
            raise TypeError("evidence must be a path, the text of a .evid file, a dict {variable: value} or "
                            f"pairs (variable, value); got {type(source).__name__}") from None
    out = {}
    for p in pairs:
        if len(p) != 2:
            raise InputDataError(f"{what}: {p!r} is not a pair (variable, value)")
        v, x = p
        for name, a in (("variable", v), ("value", x)):
            if isinstance(a, (bool, np.bool_)) or not float(a).is_integer():
                raise InputDataError(f"{what}: {name} {a!r} of the pair {p!r} is not an integer")
        v, x = int(v), int(x)
        if not 0 <= v < len(cards):
            raise InputDataError(f"{what}: variable {v} is not in the model (0..{len(cards) - 1})")
        if not 0 <= x < cards[v]:
            raise InputDataError(f"{what}: value {x} of variable {v} is outside its {cards[v]} states")
        if out.get(v, x) != x:
            raise InputDataError(f"{what}: variable {v} is observed twice, as {out[v]} and {x}")
        out[v] = x
    return out


def _is_evidence_text(s):
    parts = s.split()
    return bool(parts) and all(p.lstrip("-").isdigit() for p in parts)


def _sample_count(tok):
    """Number of samples if ``tok`` reads as PIC 2011 samples (count, then per sample k and k pairs)."""
    k, count = 1, 0
    try:
        while k < len(tok):
            k += 1 + 2 * int(tok[k])
            count += 1
    except ValueError:
        return None
    return count if k == len(tok) else None


def _evidence_pairs(t):
    m = len(t)
    if m == 0:
        raise InputDataError(f"{t.what}: empty evidence")
    first = t.integer("the number of observed variables")
    if m == 1 + 2 * first:               # UAI 2014-2022: k, then k pairs
        k = first
    elif first == 1 and m >= 2 and m % 2 == 0:   # PIC 2011: one sample, then k and k pairs
        k = t.integer("the number of observed variables")
        if m != 2 + 2 * k:
            raise InputDataError(f"{t.what}: {m} tokens do not match {k} observed variables")
    elif first > 1 and _sample_count(t.tok) == first:
        raise InputDataError(f"{t.what}: {first} evidence samples; give one sample (one conditioning)")
    else:
        raise InputDataError(f"{t.what}: {m} tokens do not match {first} observed variables "
                             f"(expected {1 + 2 * first}: the count, then variable/value pairs)")
    return [(t.integer("an observed variable"), t.integer("an observed value")) for _ in range(k)]


def energy_from_uai(source, evidence=None):
    """The :class:`~varopt.program.energy.EnergyModel` ``E(x) = -ln p~(x | evidence)`` of a UAI model
    (module docstring), over the unobserved variables, named ``x[v]`` with ``v`` the file's index."""
    from .energy import EnergyModel

    model = read_uai(source)
    obs = {} if evidence is None else read_evidence(evidence, model.cards)
    for v, c in enumerate(model.cards):
        if c == 1:
            obs.setdefault(v, 0)     # one state: a constant, as if observed
    free = [v for v in range(model.n) if v not in obs]
    pos = {v: k for k, v in enumerate(free)}
    consts, lin = [], np.zeros(len(free))
    qi, qj, qv = [], [], []
    for f, (scope, table) in enumerate(zip(model.scopes, model.tables)):
        index = tuple(obs[v] if v in obs else slice(None) for v in scope)
        T = table[index]
        rest = [v for v in scope if v not in obs]
        where = f"{model.where}, factor {f} (table at line {model.lines[f]}, scope {list(scope)})"
        for v in rest:
            if model.cards[v] != 2:
                raise ModelStructureError(
                    f"{where}: variable {v} has {model.cards[v]} states; energy models take binary variables "
                    "(cardinality 2) or observed ones (evidence)")
        if len(rest) > 2:
            raise ModelStructureError(
                f"{where}: {len(rest)} unobserved variables {rest}; energy models take factors of at most two "
                "variables (pairwise), after conditioning on the evidence")
        if (T == 0).any():
            k = int(np.flatnonzero(np.ravel(T) == 0)[0])
            state = [int(a) for a in np.unravel_index(k, T.shape)] if T.ndim else []
            raise InputDataError(
                f"{where}: the zero entry at state {state} of the unobserved variables {rest} is a hard "
                "constraint (ln 0 = -inf), which an energy model cannot represent")
        L = np.log(T)
        if len(rest) == 0:
            consts.append(float(L))
        elif len(rest) == 1:
            a = pos[rest[0]]
            consts.append(L[0])
            lin[a] += L[1] - L[0]
        else:
            a, b = pos[rest[0]], pos[rest[1]]
            consts.append(L[0, 0])
            lin[a] += L[1, 0] - L[0, 0]
            lin[b] += L[0, 1] - L[0, 0]
            qi.append(a)
            qj.append(b)
            qv.append(L[1, 1] - L[1, 0] - L[0, 1] + L[0, 0])
    # the energy is minus the log-potential (p ∝ exp(-E) at beta = 1)
    return EnergyModel.from_bits(-math.fsum(consts), -lin, np.array(qi, dtype=np.int64),
                                 np.array(qj, dtype=np.int64), -np.array(qv, dtype=float),
                                 names=[f"x[{v}]" for v in free])
