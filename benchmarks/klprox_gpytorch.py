"""klprox vs GPyTorch natural-gradient VI (the same algorithm, learning rate beta/(1+beta)) in one run.

GP classification on heart_statlog (135 training rows of a 50 % split, 13 standardized features),
squared-exponential kernel at fixed (log ell, log sf) = (1.8, 1.8) (what klprox selects on this split),
logistic likelihood. GPyTorch: ``ApproximateGP`` with the training inputs as inducing points
(``learn_inducing_locations=False``), ``NaturalVariationalDistribution``, ``NGD`` over all points, float64,
a Bernoulli-logistic likelihood written here (GPyTorch's own ``BernoulliLikelihood`` is probit), expected
log-likelihood by Gauss-Hermite with 100 nodes. For each learning rate: the time and iterations to reach
the klprox -ELBO within 1e-6 relative (both models add a small jitter to K, so they differ slightly:
"gap at end" shows GPyTorch's own limit). Run: ``python benchmarks/klprox_gpytorch.py``
(needs ``torch`` and ``gpytorch``).
"""
from __future__ import annotations

import math
import time


import varopt  # noqa: F401
from varopt.formulations.bayes_glm import gp_program
from shared_data import load_heart, splits
from varopt.registry import get_solver

LOG_ELL, LOG_SF = 1.8, 1.8


def gpytorch_run(X, y, lr, target, max_iter=3000, time_cap=120.0):
    import torch
    import gpytorch
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    Xt, yt = torch.tensor(X), torch.tensor(y)

    class Logistic(gpytorch.likelihoods._OneDimensionalLikelihood):
        def forward(self, function_samples, *args, **kwargs):
            return torch.distributions.Bernoulli(logits=function_samples)

    class GP(gpytorch.models.ApproximateGP):
        def __init__(self):
            vd = gpytorch.variational.NaturalVariationalDistribution(Xt.shape[0])
            vs = gpytorch.variational.VariationalStrategy(self, Xt, vd, learn_inducing_locations=False)
            super().__init__(vs)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    model, lik = GP(), Logistic()
    model.covar_module.base_kernel.lengthscale = math.exp(LOG_ELL)
    model.covar_module.outputscale = math.exp(2 * LOG_SF)
    for p in model.hyperparameters():
        p.requires_grad_(False)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=Xt.shape[0])
    opt = gpytorch.optim.NGD(model.variational_parameters(), num_data=Xt.shape[0], lr=lr)
    t0 = time.perf_counter()
    hit, val = None, math.nan
    with gpytorch.settings.num_gauss_hermite_locs(100):
        for it in range(1, max_iter + 1):
            opt.zero_grad()
            loss = -mll(model(Xt), yt)
            loss.backward()
            opt.step()
            val = float(loss) * Xt.shape[0]
            if not math.isfinite(val):
                return "diverged", it, time.perf_counter() - t0, val
            if hit is None and abs(val - target) <= 1e-6 * abs(target):
                hit = (it, time.perf_counter() - t0)
                break
            if time.perf_counter() - t0 > time_cap:
                break
    if hit is None:
        return "not reached", it, time.perf_counter() - t0, val
    return "reached", hit[0], hit[1], val


def main():
    X, y = load_heart()
    tr, _ = splits(len(y), 1)[0]
    X, y = X[tr], y[tr]
    p = gp_program(X, y, "logistic", LOG_ELL, LOG_SF)[0]
    t0 = time.perf_counter()
    r = get_solver("klprox").solve(p)
    t_prox = time.perf_counter() - t0
    print(f"klprox: {r.status}, -ELBO {r.objective:.10f}, {r.iterations} iterations, {t_prox:.3f} s")
    print(f"{'GPyTorch NGD lr':>16} {'outcome':>12} {'iterations':>10} {'time s':>8} {'-ELBO at stop':>16} {'time/klprox':>11}")
    for lr in (1.0, 0.5, 0.2, 0.1):
        out, it, t, val = gpytorch_run(X, y, lr, r.objective)
        print(f"{lr:16.2f} {out:>12} {it:10d} {t:8.2f} {val:16.8f} {t / t_prox:11.1f}")


if __name__ == "__main__":
    main()
