"""The oracle package: protocol, import boundary, common random numbers."""
import ast
import pathlib

import numpy as np

from varopt.oracles import FiniteSumOracle, Oracle, Sampler, StreamOracle, UserOracle


def test_old_ipsa_path_reexports_the_same_classes():
    from varopt.solvers import ipsa
    from varopt.solvers.ipsa import oracles as old
    assert ipsa.FiniteSumOracle is FiniteSumOracle and old.Sampler is Sampler
    assert ipsa.StreamOracle is StreamOracle and ipsa.UserOracle is UserOracle and ipsa.Oracle is Oracle


def test_oracles_package_imports_no_solver_or_frontend():
    root = pathlib.Path(__file__).resolve().parents[1] / "varopt" / "oracles"
    banned = ("pyomo", "cvxpy", "varopt.frontends", "varopt.solvers")
    for f in root.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                # relative ".." from varopt/oracles/ is varopt itself
                names = [("varopt." if node.level == 2 else "") + (node.module or "")]
            else:
                continue
            for n in names:
                assert not n.startswith(banned), f"{f.name} imports {n}"


def test_user_oracle_common_random_numbers():
    o = UserOracle(lambda x, rng: x + rng.standard_normal(x.size))
    o.start(np.random.default_rng(0), 1, "uniform")
    b1, b2 = o.next_batch(), o.next_batch()
    x = np.zeros(3)
    np.testing.assert_allclose(o.gradient(x, b1) - x, o.gradient(x + 1.0, b1) - (x + 1.0), rtol=0, atol=1e-12)
    assert not np.allclose(o.gradient(x, b1), o.gradient(x, b2))


def test_sampler_permutation_visits_every_sample_once_per_pass():
    s = Sampler(7, 3, "permutation", np.random.default_rng(1))
    seen = np.concatenate([s.next() for _ in range(7)])  # 21 = three passes
    for p in range(3):
        assert sorted(seen[7 * p:7 * p + 7]) == list(range(7))
