"""Every source of sampled (or exact) gradients, values and curvature estimates, behind one protocol.

Nothing here imports a solver, Pyomo or CVXPY.
"""
from .affine import AffineOracle
from .bound import BoundOracle
from .finite_sum import FiniteSumOracle
from .gaussian import GaussianOracle
from .colouring import colour_classes
from .gibbs import GibbsOracle
from .gibbs_kernel import ColourGibbs
from .ising import IsingExactOracle, IsingGibbsOracle
from .particles import Particles
from .protocol import Oracle
from .sampling import Sampler
from .stream import StreamOracle
from .user import UserOracle

__all__ = ["AffineOracle", "Oracle", "FiniteSumOracle", "UserOracle", "StreamOracle", "Sampler", "GaussianOracle", "GibbsOracle",
           "BoundOracle", "IsingExactOracle", "IsingGibbsOracle",
           "ColourGibbs", "Particles", "colour_classes"]
