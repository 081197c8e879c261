"""Option ``backend`` of the solvers with compiled kernels (ipsa, majorize): ``'numpy'`` (the reference path),
``'numba'`` (the kernels; an error without numba) or ``'auto'`` (numba when installed)."""
from __future__ import annotations

from ..errors import InvalidOptionError


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def missing_numba() -> InvalidOptionError:
    """The error of ``backend='numba'`` when numba is not installed."""
    return InvalidOptionError("backend='numba' needs the numba package (pip install 'varopt[fast]'); "
                              "backend='auto' uses numba when it is installed and numpy otherwise")
