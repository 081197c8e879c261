"""klprox vs GPyTorch natural-gradient VI (the same algorithm, learning rate beta/(1+beta)) in one run.

``--data heart``: GP classification on heart_statlog (135 training rows of a 50 % split, 13 standardized
features), squared-exponential kernel at fixed (log ell, log sf) = (1.8, 1.8) (what klprox selects on this
split), logistic likelihood. ``--data housing``: GP regression on housing (253 training rows of split 0),
Laplace likelihood with noise std exp(-2), (log ell, log sf) = (1, 0) (klprox's pick on split 0 of
benchmarks/klprox_housing.py); the GPyTorch likelihood's expected log density is the closed form
``E|y - f| = d (2 Phi(d/s) - 1) + 2 s phi(d/s)`` (``d = y - E f``, ``s^2 = Var f``), written here, so both
methods maximise the same ELBO (GPyTorch's own ``LaplaceLikelihood`` integrates the kink by quadrature).
``--data both`` (default) runs the two. GPyTorch: ``ApproximateGP`` with the training inputs as inducing points
(``learn_inducing_locations=False``), ``NaturalVariationalDistribution``, ``NGD`` over all points, float64,
a Bernoulli-logistic likelihood written here (GPyTorch's own ``BernoulliLikelihood`` is probit), expected
log-likelihood by Gauss-Hermite with 100 nodes, timed from the data (model construction included; klprox here is
timed from its program, whose construction, ~1 ms on heart, is outside its clock: benchmarks/klprox_pairs.py times
both from the built model, or both from the data with ``--from-data``). For each learning rate: the time and
iterations to reach
the klprox -ELBO within 1e-6 relative (the same prior K + eps I as klprox's whitened model: see
``gpytorch_run``). klprox with its defaults (``mean_step='auto'``: the natural mean step first, beta up to 10)
and with the paper's mean step (16) (``mean_step='paper'``, beta up to 1: the default before the natural step
became the first one); its time to the same ELBO is that of its first iterate within 1e-6 relative of its own
optimum (the run's history), the whole solve (to residuals 1e-8) is shown too; klprox times are medians of 5
runs, GPyTorch runs under 5 s medians of 5; the last line gives the ratio at GPyTorch's best learning rate (lr > 1
diverges on heart, 0.9 is the fastest there).
Run: ``python benchmarks/klprox_gpytorch.py [--data heart|housing|both] [--lrs 1,0.5,0.2,0.1]``
(needs ``torch`` and ``gpytorch``).
"""
from __future__ import annotations

import argparse
import math
import os
import time
import warnings


import numpy as np

import varopt  # noqa: F401
from varopt.formulations.bayes_glm import gp_program
from shared_data import load_heart, load_housing, splits
from varopt.registry import get_solver

#: data set -> (loader, likelihood, log ell, log sf, noise std)
PROBLEMS = {"heart": (load_heart, "logistic", 1.8, 1.8, None),
            "housing": (load_housing, "laplace", 1.0, 0.0, math.exp(-2.0))}


def gpytorch_run(X, y, lr, target, likelihood="logistic", log_ell=1.8, log_sf=1.8, noise=None, max_iter=3000,
                 time_cap=120.0, eps=0.0, from_data=True):
    """``(outcome, iterations, seconds, -ELBO at the stop)`` of GPyTorch NGD to ``target`` within 1e-6 relative; the clock
    starts at the data (``from_data``: the model's construction included) or once the model is built."""
    import torch
    import gpytorch
    from linear_operator.operators import DenseLinearOperator
    from linear_operator.utils.errors import NotPSDError
    from linear_operator.utils.warnings import NumericalWarning
    warnings.simplefilter("ignore", NumericalWarning)      # the jitter added on the way to a NotPSDError (lr > 1)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    # from_data: the model, likelihood, ELBO and optimizer built inside the timed part (~1 ms); else the clock starts
    # once they are built (as klprox's starts at its program: its set-up, the likelihood view and the start, inside)
    t0 = time.perf_counter()
    Xt, yt = torch.tensor(X), torch.tensor(y)

    class Logistic(gpytorch.likelihoods._OneDimensionalLikelihood):
        def forward(self, function_samples, *args, **kwargs):
            return torch.distributions.Bernoulli(logits=function_samples)

    class ExactLaplace(gpytorch.likelihoods._OneDimensionalLikelihood):
        """log p(y | f) = -|y - f| / b - log 2b, b = noise / sqrt 2, with its Gaussian expectation in closed form."""

        def __init__(self, b):
            super().__init__()
            self.b = b

        def forward(self, function_samples, *args, **kwargs):
            return torch.distributions.Laplace(function_samples, self.b)

        def expected_log_prob(self, observations, function_dist, *args, **kwargs):
            d = observations - function_dist.mean
            sd = function_dist.variance.clamp_min(1e-300).sqrt()
            z = d / sd
            cdf = 0.5 * torch.special.erfc(-z / math.sqrt(2.0))
            pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
            e_abs = d * (2 * cdf - 1) + 2 * sd * pdf
            return -e_abs / self.b - math.log(2 * self.b)

    class GP(gpytorch.models.ApproximateGP):
        def __init__(self):
            vd = gpytorch.variational.NaturalVariationalDistribution(Xt.shape[0])
            # klprox's prior is K + eps I; here the kernel adds eps where two inputs coincide (so K_zz = K_xz = K_xx =
            # K + eps I with Z = X) and the strategy's own jitter is 1e-14 (its default, 1e-6, is another prior:
            # on housing its optimum was 1.3e-4 relative above klprox's)
            vs = gpytorch.variational.VariationalStrategy(self, Xt, vd, learn_inducing_locations=False,
                                                          jitter_val=1e-14)
            super().__init__(vs)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            K = self.covar_module(x).to_dense() + eps * (torch.cdist(x, x) == 0).to(x.dtype)
            # a linear operator, not a tensor: the joint of [Z; X] is singular (Z = X), and only its blocks are used
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), DenseLinearOperator(K))

    model = GP()
    lik = Logistic() if likelihood == "logistic" else ExactLaplace(noise / math.sqrt(2.0))
    model.covar_module.base_kernel.lengthscale = math.exp(log_ell)
    model.covar_module.outputscale = math.exp(2 * log_sf)
    for p in model.hyperparameters():
        p.requires_grad_(False)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=Xt.shape[0])
    opt = gpytorch.optim.NGD(model.variational_parameters(), num_data=Xt.shape[0], lr=lr)
    if not from_data:
        t0 = time.perf_counter()
    hit, val, first = None, math.nan, math.nan
    with gpytorch.settings.num_gauss_hermite_locs(100):
        for it in range(1, max_iter + 1):
            opt.zero_grad()
            try:
                loss = -mll(model(Xt), yt)
            except NotPSDError:    # lr > 1 on heart: the natural parameters leave the positive definite cone
                return "diverged", it, time.perf_counter() - t0, math.nan
            loss.backward()
            opt.step()
            val = float(loss.detach()) * Xt.shape[0]
            if it == 1:
                first = val
            # diverged: not finite, or -ELBO 10x above both its start and the target (housing at lr 0.5: 7.7e5
            # after 60 s, against 140)
            if not math.isfinite(val) or val > 10 * max(abs(first), abs(target)):
                return "diverged", it, time.perf_counter() - t0, val
            if hit is None and abs(val - target) <= 1e-6 * abs(target):
                hit = (it, time.perf_counter() - t0)
                break
            if time.perf_counter() - t0 > time_cap:
                break
    if hit is None:
        return "not reached", it, time.perf_counter() - t0, val
    return "reached", hit[0], hit[1], val


def klprox_time_to(r, rel=1e-6):
    """Wall time of klprox's first iterate within ``rel`` of its final -ELBO (from its history)."""
    for e in r.history:
        if abs(e["objective"] - r.objective) <= rel * abs(r.objective):
            return e["time"]
    return r.wall_time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=("heart", "housing", "both"), default="both")
    ap.add_argument("--lrs", default="1.1,1,0.95,0.9,0.85,0.8,0.7,0.5,0.25,0.1",
                    help="GPyTorch NGD learning rates (the best one on heart is 0.9: 8 iterations against 10 at 1)")
    ap.add_argument("--time-cap", type=float, default=120.0, help="seconds per GPyTorch run")
    args = ap.parse_args()
    for name in (("heart", "housing") if args.data == "both" else (args.data,)):
        load, lik, le, ls, noise = PROBLEMS[name]
        X, y = load()
        tr, _ = splits(len(y), 1)[0]
        X, y = X[tr], y[tr]
        p, _, eps = gp_program(X, y, lik, le, ls, 1.0 if noise is None else noise)
        print(f"\n{name} ({lik}, {X.shape[0]} rows, (log ell, log sf) = ({le}, {ls})); load average "
              f"{os.getloadavg()[0]:.2f}")
        print(f"{'klprox options':<36} {'status':>10} {'-ELBO':>16} {'iterations':>10} {'time s':>8} {'to 1e-6 s':>9}")
        t_to = {}
        for label, kw in (("defaults", {}), ("mean_step='paper' (the old default)", dict(mean_step="paper"))):
            r = get_solver("klprox").solve(p, **kw)     # once to warm up caches, then the median of 5 timed runs
            runs = []
            for _ in range(5):
                t0 = time.perf_counter()
                r = get_solver("klprox").solve(p, **kw)
                runs.append((time.perf_counter() - t0, klprox_time_to(r)))
            t_prox, t_to[label] = (float(np.median(v)) for v in zip(*runs))
            print(f"{label:<36} {r.status:>10} {r.objective:16.10f} {r.iterations:10d} {t_prox:8.4f} "
                  f"{t_to[label]:9.4f}", flush=True)
        print("GPyTorch: time to -ELBO within 1e-6 relative of klprox's, and its ratio to klprox's time to 1e-6 of "
              "its own optimum (defaults / paper)")
        print(f"{'GPyTorch NGD lr':>16} {'outcome':>12} {'iterations':>10} {'time s':>8} {'-ELBO at stop':>16} "
              f"{'/ klprox':>9} {'/ paper':>9}")
        best = None
        for lr in (float(v) for v in args.lrs.split(",")):
            out, it, t, val = gpytorch_run(X, y, lr, r.objective, lik, le, ls, noise, max_iter=10 ** 6,
                                           time_cap=args.time_cap, eps=eps)
            if out == "reached" and t < 5.0:       # short runs: the median of 5 (timer and cache noise)
                t = float(np.median([t] + [gpytorch_run(X, y, lr, r.objective, lik, le, ls, noise, max_iter=10 ** 6,
                                                        time_cap=args.time_cap, eps=eps)[2] for _ in range(4)]))
            rat = [t / v for v in t_to.values()]
            print(f"{lr:16.2f} {out:>12} {it:10d} {t:8.4f} {val:16.8f} {rat[0]:9.1f} {rat[1]:9.1f}", flush=True)
            if out == "reached" and (best is None or t < best[1]):
                best = (lr, t, rat[0])
        if best is not None:
            print(f"GPyTorch at its best learning rate ({best[0]:g}, {best[1]:.4f} s) / klprox defaults to 1e-6: "
                  f"{best[2]:.1f}x")
        print(f"load average {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
