"""Front-ends: compile a Pyomo model or a CVXPY problem to a :class:`~varopt.program.Program`
and write solutions back. Only this package imports Pyomo or CVXPY."""


def compile_model(model, binary=False, native_atoms=()):
    """Compile a Pyomo model or CVXPY problem; returns ``(program, mapping)``.

    ``native_atoms``: the solver's :attr:`~varopt.registry.Solver.native_atoms` (CVXPY: ``square(pos(u))`` as
    ``sqpos`` rows when it holds ``"sqpos"``; Pyomo has no such expression).

    ``mapping.load(x)`` writes a solution vector back into the model. ``binary=True`` compiles an
    energy model over binary variables (for solvers with ``accepts_binary``).
    """
    mod = type(model).__module__
    if mod.startswith("cvxpy"):
        if binary:
            from .cvxpy_energy import compile_cvxpy_energy
            return compile_cvxpy_energy(model)
        from .cvxpy_compile import compile_cvxpy
        return compile_cvxpy(model, native_atoms=native_atoms)
    if binary:
        from .pyomo_energy import compile_pyomo_energy
        return compile_pyomo_energy(model)
    from .pyomo_compile import compile_pyomo
    return compile_pyomo(model)


def energy_hint() -> str:
    """The end of a "discrete variable" error: binary variables are what the energy-model solvers take
    (a user who met the error with ``gop`` learns where such a model goes; the message used to say that
    varopt as a whole solves continuous problems only)."""
    from ..registry import registered_solvers
    names = sorted(n for n, cls in registered_solvers().items() if getattr(cls, "accepts_binary", False))
    if not names:
        return ""
    return ("; a model over binary variables alone is an energy model p(x) ∝ exp(-beta f(x)) for the solvers "
            + ", ".join(repr(n) for n in names))
