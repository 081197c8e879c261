"""Biased stochastic proximal gradient (solver ``proxsg``), Honorio 2012; see :mod:`.solver` and docs/proxsg.md."""
from .penalty import SeparablePenalty, split_objective
from .schedules import Schedule
from .solver import ProxSG

__all__ = ["ProxSG", "SeparablePenalty", "Schedule", "split_objective"]
