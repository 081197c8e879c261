"""``exact``: log Z and marginals of an energy model by enumeration or variable elimination."""
from .elimination import Elimination, enumerate_model, exact_log_partition
from .solver import Exact

__all__ = ["Exact", "Elimination", "enumerate_model", "exact_log_partition"]
