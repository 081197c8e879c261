"""``cmf``: conditional mean field (Carbonetto & de Freitas 2007): SMC through finer graph partitions."""
from .solver import ConditionalMeanField

__all__ = ["ConditionalMeanField"]
