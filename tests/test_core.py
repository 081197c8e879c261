"""Result object, option validation and the solver registry."""
import json

import numpy as np
import pytest

import varopt
from varopt.errors import InvalidOptionError
from varopt.options import Option, OptionSet, common_options, positive
from varopt.result import Result


def test_result_gap_summary_json():
    r = Result(solver="s", status="optimal", x=np.array([1.0, 2.0]), objective=10.0, lower_bound=9.0,
               upper_bound=10.0, iterations=3, history=[{"iteration": 1, "lower": -np.inf, "upper": 10.0}],
               names=["a", "b"])
    assert r.abs_gap == 1.0 and r.rel_gap == pytest.approx(0.1)
    d = json.loads(r.to_json())
    assert d["variables"] == {"a": 1.0, "b": 2.0}
    assert d["history"][0]["lower"] is None  # JSON has no infinities
    assert "optimal" in r.summary() and "9" in r.summary()
    with pytest.raises(ValueError):
        Result(solver="s", status="nonsense")


def test_result_rel_gap_maximize_uses_incumbent():
    r = Result(solver="s", status="optimal", lower_bound=8.0, upper_bound=10.0, maximize=True)
    assert r.rel_gap == pytest.approx(2.0 / 8.0)


def test_options_validation():
    s = OptionSet(common_options() + [Option("mode", "a", "mode", ("a", "b")),
                                      Option("tol", 1e-6, "tol", float, positive, "must be positive")])
    o = s.validate({"max_iter": "5", "verbose": "true", "mode": "b"})
    assert o.max_iter == 5 and o.verbose is True and o.mode == "b" and o.tol == 1e-6
    with pytest.raises(InvalidOptionError, match="unknown option 'nope'.*max_iter.*mode.*tol"):
        s.validate({"nope": 1})
    with pytest.raises(InvalidOptionError, match="mode"):
        s.validate({"mode": "c"})
    with pytest.raises(InvalidOptionError, match="positive"):
        s.validate({"tol": -1})
    with pytest.raises(InvalidOptionError, match="integer"):
        s.validate({"max_iter": 2.5})


def test_plugin_is_registered_and_builtin_solvers_exist():
    names = varopt.registered_solvers()
    assert "vo_test_scipy" in names
    with pytest.raises(KeyError, match="registered"):
        varopt.get_solver("no_such_solver")


def test_solver_base_converts_maximisation():
    import scipy.sparse as sp
    from varopt.program import AtomGroup, Expression, Program
    # maximize -(x-1)^2 + 3  ->  internal: minimize (x-1)^2 - 3
    obj = Expression(1, -3.0, None, None, [AtomGroup("square", [1.0], sp.csr_matrix([[1.0]]), [-1.0])])
    p = Program(["x"], [-5], [5], obj, maximize=True)
    r = varopt.get_solver("vo_test_scipy").solve(p)
    assert r.objective == pytest.approx(3.0) and r.x[0] == pytest.approx(1.0, abs=1e-6)
    assert r.maximize and r.names == ["x"]
