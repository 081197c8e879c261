"""Command-line interface ``varopt``.

``varopt solvers`` lists the registered solvers; ``varopt solvers NAME`` prints one solver's options.
``varopt solve MODEL.py --solver NAME [--option key=value ...] [--json] [--plot FILE]``
loads ``MODEL.py``, calls its ``build()`` (a Pyomo model or a CVXPY problem; a file without ``build()`` that
creates exactly one model at module level, as MINLPLib's Pyomo files do, gives that one), compiles it
(``MODEL.uai [--evid MODEL.uai.evid]``: a UAI competition file read by ``EnergyModel.from_uai``),
solves it and prints a summary (or exactly one JSON object with ``--json``; a solver returning a
Gaussian posterior, ``klprox``, adds ``posterior_sd``: the standard deviation of every variable,
whose posterior mean is in ``variables``; the energy-model solvers, which load no state, add
``log_partition``, ``log_partition_se`` when estimated, and ``marginals``, ``{name: P(x = 1)}``, also printed
after the summary). ``python -m varopt`` is the same command.

Exit status (one table for every solver; the same statuses as ``Result.status``):

=================================  ====  ==========================================
result                             exit  meaning
=================================  ====  ==========================================
optimal, converged                  0    a solution (proved optimal, or converged)
stationary                          6    first-order point that is not a local minimum
                                          (saddle or maximum); the point is printed
iteration_limit, time_limit,        3    stopped at a limit; the best point so far
pass_limit                                is printed
infeasible                          4    proved infeasible (objective null in JSON)
unbounded                           5    proved unbounded
numerical                           7    stopped by numerical difficulties; the
                                          best feasible point is printed, the gap
                                          is open
error                               1    the solver failed (message on stderr)
interrupted (Ctrl-C)              130    the best point so far is printed
exception (bad model, option)       1    one line on stderr; ``--traceback`` for all
usage error                         2    argparse's message
=================================  ====  ==========================================

In JSON every non-finite number is ``null``; the status says why.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from .result import _plain

#: result status -> exit status (module docstring)
EXIT_CODES = {"optimal": 0, "converged": 0, "stationary": 6, "iteration_limit": 3, "time_limit": 3, "pass_limit": 3,
              "infeasible": 4, "unbounded": 5, "numerical": 7, "error": 1, "interrupted": 130}


def _parse_value(text: str):
    """``key=value`` values: Python literals when they parse (1, 1e-6, True, None, 'a', [..]), else strings."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _load_build(path: str):
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"model file {path!r} not found")
    spec = importlib.util.spec_from_file_location(f"varopt_user_model_{abs(hash(str(p.resolve())))}", p)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(p.resolve().parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    if hasattr(mod, "build") and callable(mod.build):
        return mod.build()
    return _module_level_model(mod, path)


def _module_level_model(mod, path: str):
    """The one Pyomo model or CVXPY problem a file without ``build()`` defines at module level, as the model files
    of public collections do (MINLPLib's Pyomo files, written by GAMS Convert: ``model = m = ConcreteModel()``)."""
    kinds = []
    if "pyomo.environ" in sys.modules or "pyomo.core" in sys.modules:
        from pyomo.core.base.PyomoModel import Model
        kinds.append(Model)
    if "cvxpy" in sys.modules:
        import cvxpy
        kinds.append(cvxpy.Problem)
    found = {}
    for name, obj in vars(mod).items():
        if not name.startswith("_") and kinds and isinstance(obj, tuple(kinds)):
            found.setdefault(id(obj), (name, obj))
    if len(found) == 1:
        return next(iter(found.values()))[1]
    if not found:
        raise AttributeError(f"{path} must define a function build() returning a Pyomo model or a CVXPY problem "
                             f"(or create exactly one of them at module level)")
    names = ", ".join(sorted(n for n, _ in found.values()))
    raise AttributeError(f"{path} creates several models at module level ({names}) and no build(): define build() "
                         f"returning the one to solve")


def _plot(result, path: str):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        raise RuntimeError("--plot needs matplotlib: pip install 'varopt[plot]'") from None
    hist = result.history
    if not hist:
        raise RuntimeError("the solver recorded no history to plot")
    t = [h.get("time", h.get("iteration", k)) for k, h in enumerate(hist)]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, style in (("upper", "-"), ("lower", "--"), ("objective", ":")):
        ys = [h.get(key) for h in hist]
        if any(y is not None for y in ys):
            ax.step(t, [np.nan if y is None else y for y in ys], style, where="post", label=key)
    ax.set_xlabel("time (s)" if "time" in hist[0] else "iteration")
    ax.set_ylabel("objective")
    ax.set_title(f"varopt {result.solver}: {result.status}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cmd_solvers(args) -> int:
    import varopt

    from .program.atoms import ATOMS
    if args.name:
        cls = varopt.get_solver(args.name)  # unknown names raise with the list of registered ones
        print(f"{args.name}: {cls.summary}")
        if cls.native_atoms:
            # atoms the front-ends emit only for this solver (others get their lifted form; docs/architecture.md)
            texts = ", ".join(f"{k} ({ATOMS[k].text.format(u='u')})" for k in sorted(cls.native_atoms))
            print(f"atoms taken as such: {texts}")
            for k in sorted(cls.native_atoms):
                print(f"  {k} rows from CVXPY's {ATOMS[k].hinge_forms}")
        print("options:")
        for line in cls.options.doc().splitlines():
            print(f"  {line}")
        return 0
    for name, cls in sorted(varopt.registered_solvers().items()):
        print(f"{name:12s} {cls.summary}")
    return 0


def cmd_solve(args) -> int:
    import varopt
    options = {}
    for item in args.option or []:
        if "=" not in item:
            raise ValueError(f"--option expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        options[k.strip()] = _parse_value(v.strip())
    solver = varopt.get_solver(args.solver)
    opts = solver.options.validate(options)  # fail fast, before the model is built
    if args.model.lower().endswith((".uai", ".uai.gz")):
        # a UAI competition file is an energy model already: no build(), no front-end
        from .program.energy import EnergyModel
        program, mapping = EnergyModel.from_uai(Path(args.model), args.evid and Path(args.evid)).to_program(), None
    else:
        if args.evid:
            raise ValueError("--evid applies to .uai model files only")
        model = _load_build(args.model)
        program, mapping = varopt.compile_model(model, binary=solver.accepts_binary,
                                                   native_atoms=solver.native_atoms)
    result = solver.solve(program, opts)
    if result.x is not None and mapping is not None:
        mapping.load(result.x)
    if args.plot:
        _plot(result, args.plot)
    if args.json:
        d = result.to_dict()
        keys = ("solver", "status", "message", "objective", "lower_bound", "upper_bound", "gap", "iterations",
                "wall_time", "variables")
        out = {k: d[k] for k in keys}
        sd = _posterior_sd(result)
        if sd is not None:
            out["posterior_sd"] = sd
        out.update(_energy_outputs(result))
        print(json.dumps(out))
    else:
        print(result.summary())
        energy = _energy_outputs(result)
        if energy:
            # the state is not loaded for these solvers (a marginal is not a state): log Z and the
            # marginals are their answer, and the summary alone printed neither
            print(f"  log Z       {_fmt(energy['log_partition'])}"
                  + (f"  (s.e. {_fmt(energy['log_partition_se'])})" if "log_partition_se" in energy else ""))
            for name, p in (energy.get("marginals") or {}).items():
                print(f"  P({name} = 1)  {_fmt(p)}")
    if result.status == "error":
        print(f"varopt: solver error: {result.message}", file=sys.stderr)
    return EXIT_CODES.get(result.status, 1)


def _energy_outputs(result) -> dict:
    """``log_partition`` (and ``log_partition_se`` when the solver estimates one) and ``marginals``
    (``{name: P(x = 1)}``) of an energy-model solver, JSON-safe; empty for the other solvers."""
    info = result.info if isinstance(result.info, dict) else {}
    if "log_partition" not in info:
        return {}
    out = {k: info[k] for k in ("log_partition", "log_partition_se", "marginals") if info.get(k) is not None}
    return _plain(out)


def _fmt(v):
    return "-" if v is None else f"{v:.10g}"


def _posterior_sd(result, block=256):
    """``{name: posterior standard deviation}`` of a solver returning a Gaussian posterior (klprox: the loaded point
    is its mean, ``info['covariance']`` its covariance); None for the others. Without a dense covariance (klprox's
    ``max_dense_covariance``, 5000 variables by default) the variances come from ``info['predict']`` applied to
    ``block`` unit rows at a time (the variance of ``e_j^T w``): D x block memory instead of D^2."""
    info = result.info if isinstance(result.info, dict) else {}
    cov = info.get("covariance")
    names = result.names or []
    D = len(names)
    if isinstance(cov, np.ndarray) and cov.ndim == 2 and cov.shape == (D, D):
        var = np.diag(cov)
    elif cov is None and "covariance" in info and callable(info.get("predict")) and D:
        import scipy.sparse as sp
        var = np.concatenate([np.asarray(info["predict"](sp.identity(D, format="csr")[j:j + block])[1], float)
                              for j in range(0, D, block)])
    else:
        return None
    return {n: float(v) for n, v in zip(names, np.sqrt(np.maximum(var, 0.0)))}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="varopt", description="Solve variational inference problems as optimization models.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("solvers", help="list the registered solvers, or one solver's options")
    s.add_argument("name", nargs="?", help="a solver name: print its options with defaults and docs")
    s.set_defaults(func=cmd_solvers)
    s = sub.add_parser("solve", help="solve MODEL.py (which defines build()) with a varopt solver")
    s.add_argument("model", help="Python file defining build() -> Pyomo model or CVXPY problem (or creating one "
                   "at module level), or a binary "
                   "pairwise UAI competition file (.uai, an energy model)")
    s.add_argument("--evid", metavar="FILE", help="evidence file (.uai.evid) of a .uai model")
    s.add_argument("--solver", required=True, help="solver name (see 'varopt solvers')")
    s.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option (repeatable)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    s.add_argument("--plot", metavar="FILE", help="save the bound/objective history plot to FILE")
    s.set_defaults(func=cmd_solve)
    p.add_argument("--traceback", action="store_true", help="on an error print the full traceback")
    p.add_argument("--version", action="version", version=f"varopt {_version()}")
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("varopt")
    except PackageNotFoundError:  # a source tree on sys.path without installed metadata
        from . import __version__
        return __version__


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # pragma: no cover
        print("varopt: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one-line message, non-zero exit
        if args.traceback:
            import traceback
            traceback.print_exc()
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = "" if args.traceback else " (varopt --traceback ... shows where)"
        print(f"varopt: error: {type(exc).__name__}: {msg}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
