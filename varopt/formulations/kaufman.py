"""Exact log-partition functions of the two-dimensional Ising ferromagnet (reference values).

``kaufman_log_partition(Kx, Ky, m, n)``: log Z of the zero-field ferromagnet on the periodic
``m x n`` lattice (m rows of n sites; ``Kx`` couples neighbours within a row, ``Ky`` neighbours
in adjacent rows; couplings already divided by the temperature), from Kaufman (1949) in the form
of Ferdinand & Fisher (1969):

    Z = 1/2 (2 sinh 2Ky)^(mn/2) (Z1 + Z2 + Z3 + Z4),
    Z1 = prod_{r<n} 2 cosh(m g_{2r+1}/2),   Z2 = prod_{r<n} 2 sinh(m g_{2r+1}/2),
    Z3 = prod_{r<n} 2 cosh(m g_{2r}/2),     Z4 = prod_{r<n} 2 sinh(m g_{2r}/2),
    cosh g_l = cosh 2Ky* cosh 2Kx - sinh 2Ky* sinh 2Kx cos(pi l / n)   (l >= 1),
    g_0 = 2Kx - 2Ky*,   tanh Ky* = exp(-2 Ky)   (the dual coupling).

``g_0`` changes sign at the critical point (``sinh 2Kx sinh 2Ky = 1``; isotropic
``T_c = 2 / ln(1 + sqrt 2) = 2.269``), so ``Z4`` is negative above T_c; every term is evaluated
as a sign and a logarithm and combined by a signed log-sum-exp (Z3 >= |Z4| termwise, so the
sum is positive), with ``log 2cosh``, ``log |2 sinh|`` and ``cosh g_l`` written in forms that
neither overflow at low temperature nor cancel at high temperature. Checked against transfer
matrices (tests/test_energy_formulations.py).

``onsager_log_partition_per_site(Kx, Ky)``: the thermodynamic limit (Onsager 1944),
``lim log Z / (mn) = ln 2 + 1/(8 pi^2) ∫∫ ln(cosh 2Kx cosh 2Ky - sinh 2Kx cos a - sinh 2Ky cos b) da db``,
by the midpoint rule (spectrally accurate for a periodic integrand away from T_c).
"""
from __future__ import annotations

import math

import numpy as np

_LOG2 = math.log(2.0)


def _log2cosh(y):
    a = np.abs(y)
    return a + np.log1p(np.exp(-2.0 * a))


def _log2sinh_abs(y):
    a = np.abs(y)
    with np.errstate(divide="ignore"):
        return a + np.log(-np.expm1(-2.0 * a))


def _logcosh(y):
    return _log2cosh(y) - _LOG2


def _signed_logsumexp(t, signs):
    """``log sum_i signs_i exp(t_i)`` for a positive sum. Written out because scipy 1.15's ``logsumexp``
    with mixed-sign ``b`` returns NaN when several terms share the maximum (the four terms of a nearly
    free lattice are all equal)."""
    top = float(np.max(t))
    return top + math.log(float(np.sum(signs * np.exp(t - top))))


def kaufman_log_partition(Kx, Ky, m, n):
    """Exact log Z of the periodic m x n zero-field ferromagnet (module docstring)."""
    Kx, Ky = float(Kx), float(Ky)
    m, n = int(m), int(n)
    if not (Kx > 0 and Ky > 0 and math.isfinite(Kx) and math.isfinite(Ky)):
        raise ValueError("kaufman_log_partition needs finite positive couplings Kx, Ky")
    if m < 2 or n < 2:
        raise ValueError("kaufman_log_partition needs m, n >= 2")
    # -1/2 log tanh Ky as -1/2 (log(1 - e^-2Ky) - log(1 + e^-2Ky)): log1p(-2 / (e^2Ky + 1)) cancels for small Ky
    # (1 - 1e-12 rounded: log Z of a 3 x 4 torus at Ky = 1e-12 was 4e-4 too small, at 1e-8 1e-7 too large)
    Ks = -0.5 * (math.log(-math.expm1(-2.0 * Ky)) - math.log1p(math.exp(-2.0 * Ky)))
    a, b = 2.0 * Ks, 2.0 * Kx
    theta = np.pi * np.arange(2 * n) / n
    with np.errstate(divide="ignore"):
        # cosh a cosh b - sinh a sinh b cos t = (cosh(a+b)(1 - cos t) + cosh(a-b)(1 + cos t)) / 2
        log_ch = np.logaddexp(_logcosh(a + b) + np.log(1.0 - np.cos(theta)),
                              _logcosh(a - b) + np.log1p(np.cos(theta))) - _LOG2
    ch = np.exp(np.minimum(log_ch, 50.0))
    g = np.where(log_ch < 20.0, np.arccosh(np.maximum(ch, 1.0)),
                 log_ch + np.log1p(np.sqrt(-np.expm1(-2.0 * np.maximum(log_ch, 20.0)))))
    g[0] = b - a
    odd, even = g[1::2], g[0::2]
    t = np.array([_log2cosh(m * odd / 2).sum(), _log2sinh_abs(m * odd / 2).sum(),
                  _log2cosh(m * even / 2).sum(), _log2sinh_abs(m * even / 2).sum()])
    signs = np.array([1.0, 1.0, 1.0, np.sign(even[0])])
    keep = np.isfinite(t) & (signs != 0)
    log_pref = 0.5 * m * n * (2.0 * Ky + math.log(-math.expm1(-4.0 * Ky)))  # log (2 sinh 2Ky)^(mn/2)
    return float(log_pref - _LOG2 + _signed_logsumexp(t[keep], signs[keep]))


def onsager_log_partition_per_site(Kx, Ky, points=512):
    """log Z per site of the infinite lattice (Onsager 1944), midpoint rule with ``points^2`` nodes."""
    t = (np.arange(points) + 0.5) * 2.0 * np.pi / points
    ca, cb = np.cos(t)[:, None], np.cos(t)[None, :]
    f = np.log(np.cosh(2 * Kx) * np.cosh(2 * Ky) - np.sinh(2 * Kx) * ca - np.sinh(2 * Ky) * cb)
    return float(_LOG2 + 0.5 * f.mean())
