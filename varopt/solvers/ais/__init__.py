"""``ais``: annealed importance sampling with resampling (tempered SMC); unbiased Z estimate."""
from .solver import AnnealedIS

__all__ = ["AnnealedIS"]
