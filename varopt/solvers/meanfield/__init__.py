"""``meanfield``: naive mean field by damped coordinate ascent; certified lower bound on log Z."""
from .solver import MeanField, mean_field_bound

__all__ = ["MeanField", "mean_field_bound"]
