"""The shared run loop (varopt.core.run) through a test-only solver of under 60 lines
(tests/run_loop_solver.py): limits, history, progress, callback, Ctrl-C and the three entry
points come for free."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

import run_loop_solver  # noqa: F401  (registers 'vo_test_pgd')
import varopt
from varopt.core.run import Run
from varopt.errors import InvalidOptionError

pyo = pytest.importorskip("pyomo.environ")
cp = pytest.importorskip("cvxpy")

HERE = Path(__file__).resolve().parent
X_STAR = np.array([10 / 21, 11 / 42])  # optimum of tests/models/pyomo_box.py (interior: gradient = 0)
F_STAR = (X_STAR[0] - 1) ** 2 + 25 * (X_STAR[1] - 0.3) ** 2 + 4 * X_STAR[0] * X_STAR[1]


def box_model():
    sys.path.insert(0, str(HERE / "models"))
    try:
        import pyomo_box
    finally:
        sys.path.pop(0)
    return pyomo_box.build()


def test_the_solver_is_small():
    lines = (HERE / "run_loop_solver.py").read_text().splitlines()
    assert len(lines) < 60


def test_reference_optimum_by_scipy():
    f = lambda z: (z[0] - 1) ** 2 + 25 * (z[1] - 0.3) ** 2 + 4 * z[0] * z[1]  # noqa: E731
    r = minimize(f, [0.0, 0.0], bounds=[(-2, 2), (-2, 2)], method="L-BFGS-B", tol=1e-14)
    assert np.allclose(r.x, X_STAR, atol=1e-6) and r.fun == pytest.approx(F_STAR, abs=1e-9)


def test_pyomo_entry_point_and_history():
    m = box_model()
    res = pyo.SolverFactory("vo_test_pgd").solve(m)
    r = res.varopt_result
    assert r.status == "converged" and r.iterations > 1
    assert np.allclose([pyo.value(m.x), pyo.value(m.y)], X_STAR, atol=1e-6)
    assert pyo.value(m.obj) == pytest.approx(F_STAR, abs=1e-9)
    assert [h["iteration"] for h in r.history] == list(range(1, r.iterations + 1))
    objs = [h["objective"] for h in r.history]
    assert all(b <= a + 1e-15 for a, b in zip(objs, objs[1:]))
    assert all({"time", "step", "lower", "upper"} <= set(h) for h in r.history)


def test_cvxpy_entry_point_and_maximisation_sense():
    x = cp.Variable(2, bounds=[-2, 2])
    prob = cp.Problem(cp.Maximize(-(cp.square(x[0] - 1) + 25 * cp.square(x[1] - 0.3) + 4 * x[0] * x[1])))
    val = prob.solve(method="vo_test_pgd")
    assert val == pytest.approx(-F_STAR, abs=1e-9) and np.allclose(x.value, X_STAR, atol=1e-6)
    assert prob.varopt_result.history[-1]["objective"] == pytest.approx(-F_STAR, abs=1e-9)  # user's sense


def test_cli_entry_point():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
               VAROPT_PLUGINS="run_loop_solver")
    r = subprocess.run([sys.executable, "-m", "varopt.cli", "solve", str(HERE / "models" / "pyomo_box.py"),
                        "--solver", "vo_test_pgd", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["status"] == "converged" and d["objective"] == pytest.approx(F_STAR, abs=1e-9)


def test_limits():
    m = box_model()
    r = pyo.SolverFactory("vo_test_pgd").solve(m, max_iter=3).varopt_result
    assert r.status == "iteration_limit" and r.iterations == 3 and len(r.history) == 3
    assert str(pyo.SolverFactory("vo_test_pgd").solve(box_model(), max_iter=3).solver.termination_condition) \
        == "maxIterations"
    program, _ = varopt.compile_model(box_model())
    r = varopt.get_solver("vo_test_pgd").solve(program, time_limit=1e-9)
    assert r.status == "time_limit" and r.iterations == 1  # the first iteration always runs
    with pytest.raises(InvalidOptionError, match="max_iter"):
        varopt.get_solver("vo_test_pgd").solve(program, max_iter=0)


def test_progress_on_verbose(capsys):
    program, _ = varopt.compile_model(box_model())
    varopt.get_solver("vo_test_pgd").solve(program, verbose=True, max_iter=4)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("vo_test_pgd it") and "objective" in line for line in err)


def test_callback_stops_the_run():
    program, _ = varopt.compile_model(box_model())
    seen = []
    r = varopt.get_solver("vo_test_pgd").solve(program, callback=lambda it, x: seen.append(it) or it == 2)
    assert seen == [1, 2] and r.status == "iteration_limit" and r.message == "stopped by callback"


def test_ctrl_c_returns_the_incumbent_with_status_interrupted():
    xs = []

    def cb(it, x):
        xs.append(x.copy())
        if it == 3:
            raise KeyboardInterrupt

    m = box_model()
    res = pyo.SolverFactory("vo_test_pgd").solve(m, callback=cb)
    r = res.varopt_result
    assert r.status == "interrupted" and r.iterations == 3 and "interrupted" in r.message
    assert np.array_equal(r.x, xs[-1]) and str(res.solver.termination_condition) == "userInterrupt"
    assert pyo.value(m.x) == xs[-1][0]  # the incumbent is loaded into the model
    x = cp.Variable(2, bounds=[-2, 2])
    prob = cp.Problem(cp.Minimize(cp.square(x[0] - 1) + 25 * cp.square(x[1] - 0.3) + 4 * x[0] * x[1]))
    xs.clear()
    prob.solve(method="vo_test_pgd", callback=cb)
    assert prob.status == "user_limit" and np.array_equal(x.value, xs[-1])


def test_interrupt_before_any_point():
    run = Run("demo", None)
    r = run.interrupted()
    assert r.status == "interrupted" and r.x is None and "no point yet" in r.message


def test_old_style_plugins_still_work():
    # tests/plugin_solver.py defines _solve(program, opts): the registry still calls it
    program, _ = varopt.compile_model(box_model())
    r = varopt.get_solver("vo_test_scipy").solve(program)
    assert r.status == "converged" and r.objective == pytest.approx(F_STAR, abs=1e-8)


@pytest.mark.parametrize("verbose, stamped", [(False, False), (True, False), (False, True), (True, True)])
def test_record_batch_appends_the_entries_record_would(verbose, stamped, capsys):
    """A compiled loop hands over its kernel's records at once: the same entries (iteration, fields,
    an update of an entry already there; key order included) as ``record`` one by one, and the progress
    lines when verbose; also when the caller built whole entries (``stamped``: the keys of Run.HEAD
    first)."""
    class Opts:
        history_every = 5

    Opts.verbose = verbose
    entries = [(0, {"objective": 9.0, "mu": 0.5}), (5, {"objective": 3.0, "mu": 0.25}), (10, {"mu": 0.125})]
    one, batch = Run("s", Opts()), Run("s", Opts())
    for r in (one, batch):
        r.iteration = 0
        r.record(objective=10.0)  # the entry of iteration 0 exists: updated, not duplicated
    capsys.readouterr()
    for it, fields in entries:
        one.iteration = it
        one.record(**fields)
    lines_one = capsys.readouterr().err
    if stamped:
        batch.record_batch([(it, {"iteration": it, "time": None, "lower": None, "upper": None,
                                  "objective": None, **fields}) for it, fields in entries], stamped=True)
    else:
        batch.record_batch(entries)
    lines_batch = capsys.readouterr().err
    strip = [[{k: v for k, v in h.items() if k != "time"} for h in r.history] for r in (one, batch)]
    assert strip[0] == strip[1] and [h["iteration"] for h in batch.history] == [0, 5, 10]
    assert [list(h) for h in one.history] == [list(h) for h in batch.history]
    assert batch.history[0]["objective"] == 9.0 and batch.iteration == 10
    assert all(h["time"] >= 0 for h in batch.history)
    # a line per new entry (iterations 5 and 10) when verbose
    assert lines_batch.count("s it") == lines_one.count("s it") == (2 if verbose else 0)
