"""The ``varopt`` command line, driven in a subprocess with the test plugin loaded via VAROPT_PLUGINS."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"


def run_cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env["VAROPT_PLUGINS"] = "plugin_solver"
    return subprocess.run([sys.executable, "-m", "varopt.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_solvers_lists_plugin_and_builtins():
    r = run_cli("solvers")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert any(l.startswith("vo_test_scipy ") and "test-only" in l for l in lines)
    for name in ("gop", "ipsa", "majorize"):  # built-ins; in-process test plugins are not in the subprocess
        assert any(l.split()[0] == name for l in lines)


def test_solvers_name_prints_options():
    r = run_cli("solvers", "gop")
    assert r.returncode == 0, r.stderr
    for opt in ("rel_gap (default 1e-06)", "abs_gap", "time_limit", "max_iter", "partition", "executor",
                "bound_tightening", "seed", "verbose"):
        assert opt in r.stdout
    r = run_cli("solvers", "nosuch")
    assert r.returncode != 0 and "registered: " in r.stderr


@pytest.mark.parametrize("model,names", [("pyomo_small.py", ["x", "y[1]", "y[2]"]),
                                         ("cvxpy_small.py", ["x", "y[0]", "y[1]"])])
def test_solve_json(model, names):
    r = run_cli("solve", str(MODELS / model), "--solver", "vo_test_scipy", "--option", "tol=1e-12", "--json")
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()
    assert len(out) == 1
    d = json.loads(out[0])
    assert set(d) == {"solver", "status", "message", "objective", "lower_bound", "upper_bound", "gap",
                      "iterations", "wall_time", "variables"}
    assert d["solver"] == "vo_test_scipy" and d["status"] == "converged"
    assert sorted(d["variables"]) == sorted(names)
    # optimum: x - 1 = -(y1 + 2) balance on x + y1 = 0 -> x = 1.5, y1 = -1.5, obj = 0.25 + 0.25
    assert d["objective"] == pytest.approx(0.5, abs=1e-6)
    assert d["variables"][names[0]] == pytest.approx(1.5, abs=1e-5)


def test_unknown_option_lists_valid_ones():
    r = run_cli("solve", str(MODELS / "pyomo_small.py"), "--solver", "vo_test_scipy", "--option", "bogus=1")
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "bogus" in err[0] and "max_iter" in err[0] and "tol" in err[0]


@pytest.mark.parametrize("args,needle", [
    (("solve", str(MODELS / "missing.py"), "--solver", "vo_test_scipy"), "not found"),
    (("solve", str(MODELS / "no_build.py"), "--solver", "vo_test_scipy"), "build()"),
    (("solve", str(MODELS / "pyomo_small.py"), "--solver", "nope"), "unknown varopt solver"),
])
def test_errors_exit_nonzero_with_one_line(args, needle):
    r = run_cli(*args)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "h.png"
    r = run_cli("solve", str(MODELS / "pyomo_small.py"), "--solver", "vo_test_scipy", "--plot", str(f))
    assert r.returncode == 0, r.stderr
    assert f.stat().st_size > 1000 and f.read_bytes()[:4] == b"\x89PNG"


def test_infeasible_exits_4_with_null_objective_in_json():
    r = run_cli("solve", str(MODELS / "pyomo_infeasible.py"), "--solver", "gop", "--json")
    assert r.returncode == 4, r.stderr
    d = json.loads(r.stdout)
    assert d["status"] == "infeasible" and d["objective"] is None and d["lower_bound"] is None


def test_limit_exits_3():
    r = run_cli("solve", str(MODELS / "pyomo_small.py"), "--solver", "vo_test_scipy", "-o", "max_iter=1", "--json")
    d = json.loads(r.stdout)
    assert d["status"] == "iteration_limit" and r.returncode == 3


def test_model_file_exception_is_one_line_unless_traceback():
    r = run_cli("solve", str(MODELS / "raises.py"), "--solver", "gop")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "--traceback" in r.stderr
    r = run_cli("--traceback", "solve", str(MODELS / "raises.py"), "--solver", "gop")
    assert r.returncode == 1 and "Traceback" in r.stderr and "in helper" in r.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a subprocess is POSIX")
def test_ctrl_c_prints_the_incumbent_and_exits_130():
    """SIGINT once the solve is under way (its progress lines on stderr say so) returns the incumbent."""
    import signal
    import time
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    p = subprocess.Popen([sys.executable, "-m", "varopt.cli", "solve", str(MODELS / "pyomo_slow.py"), "--solver",
                          "gop", "-o", "mode=gop", "-o", "verbose=True", "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env,
                         # a test run started as a background job inherits SIGINT ignored (POSIX shells do that
                         # without job control), and Python then installs no KeyboardInterrupt handler: the child
                         # gets the default disposition a terminal user has
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    seen = []
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        if "relaxed duals" in line and line.startswith("gop it"):  # inside the first expansion
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=max(1.0, deadline - time.time()))
    assert p.returncode == 130, "".join(seen)[-2000:] + err[-2000:]
    d = json.loads(out)
    assert d["status"] == "interrupted" and d["objective"] is not None and len(d["variables"]) == 36


def test_python_dash_m_varopt_runs_the_cli():
    """``python -m varopt ...`` is the same command line as the ``varopt`` script (a package needs a
    ``__main__`` module for it; without one Python exits 1 with "cannot be directly executed")."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "varopt", "solvers"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert {"klprox", "majorize"} <= {l.split()[0] for l in r.stdout.strip().splitlines()}
    r = subprocess.run([sys.executable, "-m", "varopt", "solve", str(MODELS / "cvxpy_bayes_logistic.py"), "--solver",
                        "klprox", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["solver"] == "klprox" and d["status"] == "converged" and sorted(d["variables"]) == ["w[0]", "w[1]"]
    # the posterior's standard deviations beside its mean, checked against an in-process solve
    sys.path.insert(0, str(MODELS))
    try:
        from cvxpy_bayes_logistic import build
    finally:
        sys.path.pop(0)
    prob = build()
    prob.solve(method="klprox")
    sd = np.sqrt(np.diag(prob.varopt_result.info["covariance"]))
    assert [d["posterior_sd"][k] for k in ("w[0]", "w[1]")] == pytest.approx(sd, rel=1e-9)


def _enumerate_energy_model():
    """log Z and P(x_i = 1) of tests/models/pyomo_energy.py by brute force over the 8 states."""
    import itertools
    sys.path.insert(0, str(MODELS))
    try:
        from pyomo_energy import H, W
    finally:
        sys.path.remove(str(MODELS))
    states = np.array(list(itertools.product([0, 1], repeat=3)), float)
    s = 2 * states - 1
    logw = s @ np.array(H) + sum(w * s[:, i] * s[:, j] for (i, j), w in W.items())
    log_z = np.logaddexp.reduce(logw)
    return log_z, np.exp(logw - log_z) @ states


def test_energy_solvers_report_log_partition_and_marginals(capsys):
    """The energy solvers load no state, so the CLI printed an empty ``variables`` and no answer at all; it now
    gives log Z and the marginals (checked against enumeration), in the summary and in --json."""
    from varopt.cli import main
    log_z, marg = _enumerate_energy_model()
    assert main(["solve", str(MODELS / "pyomo_energy.py"), "--solver", "exact", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["variables"] == {} and out["log_partition"] == pytest.approx(log_z, abs=1e-12)
    assert [out["marginals"][f"x[{i}]"] for i in range(3)] == pytest.approx(marg, abs=1e-12)
    assert "log_partition_se" not in out
    assert main(["solve", str(MODELS / "pyomo_energy.py"), "--solver", "ais", "-o", "seed=0"]) == 0
    text = capsys.readouterr().out
    assert "log Z" in text and "s.e." in text and "P(x[2] = 1)" in text
    assert main(["solve", str(MODELS / "pyomo_small.py"), "--solver", "gop", "--json"]) == 0   # others: unchanged
    assert "marginals" not in json.loads(capsys.readouterr().out)


# GLOBALLib/MINLPLib st_e01 as the collection's Pyomo file (written by GAMS Convert) has it: no build(), the model at
# module level under two names, the objective moved into a row with objvar. Optimum -20/3 at (6, 2/3).
ST_E01 = """\
#  NLP written by GAMS Convert
from pyomo.environ import *

model = m = ConcreteModel()

m.x1 = Var(within=Reals, bounds=(0,6), initialize=0)
m.x2 = Var(within=Reals, bounds=(0,4), initialize=0)
m.objvar = Var(within=Reals, bounds=(None,None), initialize=0)

m.obj = Objective(sense=minimize, expr= m.objvar)

m.e1 = Constraint(expr= - m.x1 - m.x2 - m.objvar == 0)
m.e2 = Constraint(expr= m.x1*m.x2 <= 4)
"""


def test_collection_file_with_a_module_level_model(tmp_path):
    f = tmp_path / "st_e01.py"
    f.write_text(ST_E01)
    r = run_cli("solve", str(f), "--solver", "gop", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["status"] == "optimal" and d["objective"] == pytest.approx(-20 / 3, abs=1e-5)
    assert d["variables"]["x1"] == pytest.approx(6, abs=1e-5) and d["variables"]["x2"] == pytest.approx(2 / 3, abs=1e-5)
    # two different models and no build(): which one is meant is not guessed
    f.write_text(ST_E01 + "\nother = ConcreteModel()\nother.x = Var(bounds=(0, 1))\nother.o = Objective(expr=other.x)\n")
    r = run_cli("solve", str(f), "--solver", "gop")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "several models" in lines[0] and "model, other" in lines[0]


def test_version():
    import varopt
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"varopt {varopt.__version__}"
