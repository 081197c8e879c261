"""UAI competition files (MARKOV/BAYES, .uai.evid) read as energy models: log Z and marginals against an
enumeration of the product of the tables written in this file (not through EnergyModel), every energy
method on a loaded model, the front-ends, real public instances and malformed files."""
import itertools
import math
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
import pytest

import varopt
from varopt.errors import InputDataError, ModelStructureError
from varopt.formulations import ising
from varopt.program.energy import EnergyModel

DATA = Path(__file__).parent / "data" / "uai"


# --- an independent reference: the product of the tables, state by state -----------------------------
def _write(kind, cards, factors, comment=False):
    """UAI text of ``factors`` = [(scope, flat table)], the last scope variable fastest."""
    lines = (["c a generated model", "c"] if comment else []) + [kind, str(len(cards)),
                                                                   " ".join(map(str, cards)), str(len(factors))]
    lines += [" ".join(map(str, [len(s), *s])) for s, _ in factors]
    for _, tab in factors:
        lines += ["", str(len(tab)), " ".join(repr(float(v)) for v in tab)]
    return "\n".join(lines) + "\n"


def _flat_index(scope, cards, x):
    k = 0
    for v in scope:                    # row-major: the last variable of the scope changes fastest
        k = k * cards[v] + x[v]
    return k


def _brute(cards, factors, evidence=None):
    """(ln Z, {v: P(x_v = 1)}) summing prod_f phi_f over the states consistent with ``evidence``."""
    evidence = evidence or {}
    logw, ones = [], {v: [] for v in range(len(cards)) if v not in evidence}
    for x in itertools.product(*[range(c) for c in cards]):
        if any(x[v] != e for v, e in evidence.items()):
            continue
        logw.append(math.fsum(math.log(tab[_flat_index(s, cards, x)]) for s, tab in factors))
        for v in ones:
            ones[v].append(x[v] == 1)
    logw = np.array(logw)
    m = logw.max()
    p = np.exp(logw - m)
    lz = m + math.log(p.sum())
    return lz, {v: float(p[np.array(o)].sum() / p.sum()) for v, o in ones.items()}


def _random_model(rng, n, strength=1.0):
    """Binary pairwise factors: unary and pair tables, repeated scopes, both orders, an unused variable."""
    cards = [2] * n
    factors = []
    unused = int(rng.integers(n)) if n > 2 else None
    used = [v for v in range(n) if v != unused]
    for v in used:
        if rng.random() < 0.7:
            factors.append(((v,), np.exp(rng.normal(0, strength, 2))))
    for _ in range(int(rng.integers(1, 2 * n))):
        a, b = rng.choice(used, 2, replace=False)
        factors.append(((int(a), int(b)), np.exp(rng.normal(0, strength, 4))))
    if len(factors) > 1:
        factors.append(factors[int(rng.integers(len(factors)))])   # the same scope twice
    return cards, factors


def _exact(e):
    return varopt.get_solver("exact").solve(e.to_program())


def test_random_pairwise_files_match_enumeration():
    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(2, 13))
        cards, factors = _random_model(rng, n, strength=rng.choice([0.3, 1.0, 3.0]))
        text = _write("MARKOV", cards, factors, comment=trial % 3 == 0)
        e = EnergyModel.from_uai(text)
        assert e.n == n and e.names == [f"x[{v}]" for v in range(n)]
        lz, marg = _brute(cards, factors)
        r = _exact(e)
        assert abs(r.info["log_partition"] - lz) < 1e-10
        for v, p in marg.items():
            assert abs(r.info["marginals"][f"x[{v}]"] - p) < 1e-10


def test_evidence_conditions_and_keeps_the_file_indices():
    rng = np.random.default_rng(1)
    for trial in range(12):
        n = int(rng.integers(3, 11))
        cards, factors = _random_model(rng, n)
        obs = rng.choice(n, int(rng.integers(1, n)), replace=False)
        ev = {int(v): int(rng.integers(2)) for v in obs}
        lz, marg = _brute(cards, factors, ev)
        pairs = " ".join(f"{v} {x}" for v, x in ev.items())
        text = _write("MARKOV", cards, factors)
        for evidence in (ev, f"{len(ev)} {pairs}\n", f"1\n{len(ev)} {pairs}\n", list(ev.items())):
            e = EnergyModel.from_uai(text, evidence=evidence)
            assert e.names == [f"x[{v}]" for v in range(n) if v not in ev]
            r = _exact(e)
            assert abs(r.info["log_partition"] - lz) < 1e-10
            assert all(abs(r.info["marginals"][f"x[{v}]"] - p) < 1e-10 for v, p in marg.items())


def test_every_variable_observed_gives_the_constant():
    cards, factors = [2, 2], [((0, 1), np.array([1.0, 2.0, 3.0, 4.0]))]
    e = EnergyModel.from_uai(_write("MARKOV", cards, factors), {0: 1, 1: 0})
    assert e.n == 0 and abs(_exact(e).info["log_partition"] - math.log(3.0)) < 1e-15


def test_larger_factors_and_cardinalities_are_accepted_once_observed():
    """A 3-variable factor with one observed variable, and a ternary observed variable, become pairwise."""
    rng = np.random.default_rng(2)
    cards = [2, 2, 3, 2]
    factors = [((0, 2, 1), np.exp(rng.normal(size=12))), ((2, 3), np.exp(rng.normal(size=6))),
               ((3,), np.exp(rng.normal(size=2))), ((1, 0, 3), np.exp(rng.normal(size=8)))]
    text = _write("MARKOV", cards, factors)
    with pytest.raises(ModelStructureError, match="variable 2 has 3 states"):
        EnergyModel.from_uai(text)
    with pytest.raises(ModelStructureError, match=r"factor 3 .*3 unobserved variables \[1, 0, 3\]"):
        EnergyModel.from_uai(text, {2: 1})
    ev = {2: 2, 3: 1}
    lz, _ = _brute(cards, factors, ev)
    assert abs(_exact(EnergyModel.from_uai(text, ev)).info["log_partition"] - lz) < 1e-10


def test_bayes_network_normalises_and_gives_the_evidence_probability():
    """A Bayesian network (CPTs, child last) is a product of factors: Z = 1, and P(e) under evidence."""
    cards = [2, 2, 2, 2]
    cpt = lambda *rows: np.ravel(rows)                            
    factors = [((0,), cpt([0.2, 0.8])), ((0, 1), cpt([0.6, 0.4], [0.3, 0.7])),
               ((0, 2), cpt([0.25, 0.75], [0.9, 0.1])), ((1, 3), cpt([0.35, 0.65], [0.8, 0.2]))]
    text = _write("BAYES", cards, factors)
    assert abs(_exact(EnergyModel.from_uai(text)).info["log_partition"]) < 1e-14
    pe = 0.2 * (0.6 * 0.65 + 0.4 * 0.2) + 0.8 * (0.3 * 0.65 + 0.7 * 0.2)   # P(x3 = 1)
    r = _exact(EnergyModel.from_uai(text, "1 3 1"))
    assert abs(r.info["log_partition"] - math.log(pe)) < 1e-14
    assert abs(r.info["log_partition"] - _brute(cards, factors, {3: 1})[0]) < 1e-12


def test_every_energy_method_runs_on_a_loaded_model():
    rng = np.random.default_rng(3)
    cards, factors = _random_model(rng, 9, strength=0.4)
    e = EnergyModel.from_uai(_write("MARKOV", cards, factors), {4: 1})
    lz, marg = _brute(cards, factors, {4: 1})
    prog = e.to_program()
    get = lambda name, **kw: varopt.get_solver(name).solve(prog, **kw)
    assert abs(get("exact").info["log_partition"] - lz) < 1e-10
    mf = get("meanfield")
    assert mf.info["log_partition_lower"] <= lz + 1e-12
    trw = get("trw", tol=1e-10, max_iter=5000)
    assert trw.info["converged"] and trw.info["log_partition_upper"] >= lz - 1e-10
    lbp = get("lbp", tol=1e-10, max_iter=5000)
    assert abs(lbp.info["log_partition"] - lz) < 0.1
    ais = get("ais", seed=0)
    assert abs(ais.info["log_partition"] - lz) < max(5 * ais.info["log_partition_se"], 0.02)
    for name in ("sasmc", "cmf"):
        r = get(name, seed=0)
        assert abs(r.info["log_partition"] - lz) < 0.1, name
        assert max(abs(r.info["marginals"][f"x[{v}]"] - p) for v, p in marg.items()) < 0.05, name


def test_front_ends_of_a_loaded_model_give_the_same_log_z():
    e = EnergyModel.from_uai(DATA / "grid4x4.uai", {5: 0, 10: 1})
    ref = _exact(e).info["log_partition"]
    m = ising.to_pyomo(e)
    assert 5 not in m.x and 10 not in m.x and len(m.x) == 14      # the file's indices, observed ones left out
    res = pyo.SolverFactory("exact").solve(m)
    r = res.varopt_result
    assert abs(r.info["log_partition"] - ref) < 1e-10
    mine = _exact(e).info["marginals"]
    assert all(abs(res.varopt_marginals[f"x[{v}]"] - mine[f"x[{v}]"]) < 1e-10 for v in (0, 6, 11, 15))
    assert ising.from_uai(DATA / "grid4x4.uai", {5: 0, 10: 1}).names == e.names
    prob, _ = ising.to_cvxpy(e)
    assert abs(-prob.solve(method="exact") - ref) < 1e-10


def _read_fixture(name):
    """(cards, factors) of a fixture parsed here, independently of varopt's reader."""
    tok = [t for line in (DATA / name).read_text().splitlines() for t in line.split()]
    n = int(tok[1])
    cards = [int(t) for t in tok[2:2 + n]]
    k, nf = 3 + n, int(tok[2 + n])
    scopes = []
    for _ in range(nf):
        size = int(tok[k])
        scopes.append(tuple(int(t) for t in tok[k + 1:k + 1 + size]))
        k += 1 + size
    factors = []
    for s in scopes:
        m = int(tok[k])
        factors.append((s, np.array([float(t) for t in tok[k + 1:k + 1 + m]])))
        k += 1 + m
    return cards, factors


def test_public_grid_instances():
    """pgmpy's 4 x 4 grid against enumeration; the UAI 2008 grid10x10.f10 (100 spins, frustrated couplings
    up to e^±9.7) against its published log10 Z = 303.09 (a PR answer: log base 10)."""
    cards, factors = _read_fixture("grid4x4.uai")
    lz, _ = _brute(cards, factors)
    assert abs(_exact(EnergyModel.from_uai(DATA / "grid4x4.uai")).info["log_partition"] - lz) < 1e-9
    e = EnergyModel.from_uai(str(DATA / "grid10x10.f10.uai"))
    assert e.n == 100 and e.m == 180
    lz10 = _exact(e).info["log_partition"] / math.log(10)
    assert abs(lz10 - 303.09) < 0.005


def test_zero_entries_are_refused_naming_the_factor():
    with pytest.raises(InputDataError, match=r"factor 5 \(table at line 34, scope \[1, 3\]\).*zero entry"):
        EnergyModel.from_uai(DATA / "test_Z2.uai")
    # a zero the evidence slices away is never evaluated: accepted, and exact
    cards, factors = [2, 2, 2], [((0, 1), np.array([0.0, 2.0, 3.0, 4.0])), ((1, 2), np.array([1.0, 2.0, 3.0, 5.0]))]
    e = EnergyModel.from_uai(_write("MARKOV", cards, factors), {0: 1})
    assert abs(_exact(e).info["log_partition"] - _brute(cards, factors, {0: 1})[0]) < 1e-12
    with pytest.raises(InputDataError, match=r"factor 0 .*zero entry at state \[0\] of the unobserved variables \[1\]"):
        EnergyModel.from_uai(_write("MARKOV", cards, factors), {0: 0})


GOOD = "MARKOV\n2\n2 2\n2\n1 0\n2 0 1\n\n2\n0.5 1.5\n\n4\n1 2 3 4\n"


@pytest.mark.parametrize("text, match", [
    (GOOD.replace("\n4\n1 2 3 4", "\n3\n1 2 3 4"), r"line 11: factor 1's table has 3 entries, expected 4"),
    (GOOD.replace("1 2 3 4\n", "1 2 3\n"), r"factor 1's table needs 4 entries but the file ends after 3.*truncated"),
    (GOOD.replace("1 2 3 4", "1 nan 3 4"), r"line 12: entry 1 of factor 1's table is nan"),
    (GOOD.replace("1 2 3 4", "1 2 -3 4"), r"line 12: entry 2 of factor 1's table is -3.0"),
    (GOOD.replace("1 2 3 4", "1 2 3 inf"), r"entry 3 of factor 1's table is inf"),
    (GOOD.replace("1 2 3 4", "1 2 x 4"), r"line 12: entry 2 of factor 1's table is not a number: 'x'"),
    (GOOD.replace("2 0 1", "2 0 2"), r"line 6: factor 1's scope names variable 2, but the model has 2 variables"),
    (GOOD.replace("2 0 1", "2 1 1"), r"factor 1's scope \[1, 1\] repeats a variable"),
    (GOOD.replace("2 2\n2\n", "2 2\n3\n"), r"factor 2"),
    (GOOD + "7\n", r"line 13: 1 tokens after the last of the 2 tables"),
    (GOOD.replace("MARKOV", "SPARSEMARKOV"), r"must be MARKOV or BAYES, got 'SPARSEMARKOV' \(sparse tables"),
    (GOOD.replace("2 2\n", "2 two\n"), r"line 3: the cardinality of variable 1 must be an integer, got 'two'"),
    (GOOD.replace("2 2\n", "2 0\n"), r"the cardinality of variable 1 must be >= 1"),
    ("", r"the file ends where the network type"),
])
def test_malformed_files_name_the_line_or_factor(text, match):
    with pytest.raises(InputDataError, match=match):
        EnergyModel.from_uai(text)


@pytest.mark.parametrize("evidence, match", [
    ("1 0 2", r"value 2 of variable 0 is outside its 2 states"),
    ("1 5 0", r"variable 5 is not in the model"),
    ("2 0 1", r"3 tokens do not match 2 observed variables"),
    ("2\n1 0 1\n1 1 1", r"2 evidence samples; give one sample"),
    ({0: 1, 1: 0.5}, r"value 0.5 .* is not an integer"),
    ([(0, 1), (0, 0)], r"variable 0 is observed twice"),
])
def test_bad_evidence_is_refused(evidence, match):
    with pytest.raises(InputDataError, match=match):
        EnergyModel.from_uai(GOOD, evidence)


def test_cardinality_and_scope_limits_name_the_culprit():
    t3 = "MARKOV\n3\n2 3 2\n1\n2 0 1\n6\n1 2 3 4 5 6\n"
    with pytest.raises(ModelStructureError, match=r"factor 0 .*variable 1 has 3 states"):
        EnergyModel.from_uai(t3)
    t_big = "MARKOV\n3\n2 2 2\n1\n3 0 1 2\n8\n1 2 3 4 5 6 7 8\n"
    with pytest.raises(ModelStructureError, match=r"factor 0 .*3 unobserved variables \[0, 1, 2\].*pairwise"):
        EnergyModel.from_uai(t_big)
    lz = math.log(sum([5, 6, 7, 8]))
    assert abs(_exact(EnergyModel.from_uai(t_big, {0: 1})).info["log_partition"] - lz) < 1e-14


def test_paths_and_missing_files(tmp_path):
    p = tmp_path / "m.uai"
    p.write_text(GOOD)
    (tmp_path / "m.uai.evid").write_text("1 1 1\n")
    a = EnergyModel.from_uai(p, tmp_path / "m.uai.evid")
    b = EnergyModel.from_uai(str(p), str(tmp_path / "m.uai.evid"))
    assert a.names == b.names == ["x[0]"] and np.allclose(a.h, b.h) and a.const == b.const
    import gzip
    with gzip.open(tmp_path / "m.uai.gz", "wt") as f:
        f.write(GOOD)
    c = EnergyModel.from_uai(tmp_path / "m.uai.gz", "1 1 1")
    assert c.names == a.names and np.allclose(c.h, a.h) and c.const == a.const
    with pytest.raises(FileNotFoundError, match="no file"):
        EnergyModel.from_uai(str(tmp_path / "absent.uai"))
    with pytest.raises(InputDataError, match=r"'.*m.uai', line 12: entry 1"):
        p.write_text(GOOD.replace("1 2 3 4", "1 nan 3 4"))
        EnergyModel.from_uai(p)


def test_command_line_solves_a_uai_file(tmp_path, capsys):
    import json

    from varopt.cli import main
    (tmp_path / "m.uai.evid").write_text("1 1 1\n")
    p = tmp_path / "m.uai"
    p.write_text(GOOD)
    assert main(["solve", str(p), "--solver", "exact", "--evid", str(tmp_path / "m.uai.evid"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # x1 = 1: Z = 0.5 * 2 + 1.5 * 4
    assert abs(out["log_partition"] - math.log(0.5 * 2 + 1.5 * 4)) < 1e-12
    assert abs(out["marginals"]["x[0]"] - 1.5 * 4 / 7) < 1e-12
