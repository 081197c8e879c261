"""``meanfield``: naive mean field by damped coordinate ascent; certified lower bound on log Z."""
from .solver import MeanField, colour_blocks, mean_field_bound, sweep

__all__ = ["MeanField", "colour_blocks", "mean_field_bound", "sweep"]
