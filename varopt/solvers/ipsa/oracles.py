"""Backward-compatible re-export: the oracles now live in :mod:`varopt.oracles`."""
from ...oracles import FiniteSumOracle, Oracle, Sampler, StreamOracle, UserOracle

__all__ = ["Oracle", "FiniteSumOracle", "UserOracle", "StreamOracle", "Sampler"]
