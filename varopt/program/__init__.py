"""The compiled program: canonical numpy/scipy representation shared by all solvers."""
from .terms import ATOM_KINDS, AtomGroup, LseGroup, QuadraticTerms
from .expression import Expression
from .program import Constraint, Program
from .energy import EnergyModel, energy_of

__all__ = ["ATOM_KINDS", "AtomGroup", "LseGroup", "QuadraticTerms", "Expression", "Constraint", "Program", "EnergyModel", "energy_of"]
