"""``trw``: tree-reweighted belief propagation; an upper bound on log Z when converged."""
from .solver import TreeReweightedBP, spanning_tree_probabilities

__all__ = ["TreeReweightedBP", "spanning_tree_probabilities"]
