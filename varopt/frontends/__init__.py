"""Front-ends: compile a Pyomo model or a CVXPY problem to a :class:`~varopt.program.Program`
and write solutions back. Only this package imports Pyomo or CVXPY."""


def compile_model(model):
    """Compile a Pyomo model or CVXPY problem; returns ``(program, mapping)``.

    ``mapping.load(x)`` writes a solution vector back into the model.
    """
    mod = type(model).__module__
    if mod.startswith("cvxpy"):
        from .cvxpy_compile import compile_cvxpy
        return compile_cvxpy(model)
    from .pyomo_compile import compile_pyomo
    return compile_pyomo(model)
