"""``sasmc``: stochastic approximation with SMC particles and the variance safeguard (Carbonetto 2009, ch. 3)."""
from .solver import StochasticApproximationSMC

__all__ = ["StochasticApproximationSMC"]
