"""Paper 3, regularized kernel methods by fixed point and coordinate descent (docs/algorithms.md
section 3).

- :mod:`.estimators`: ``RegularizedKernelClassifier``, ``RegularizedKernelRegressor``;
- :mod:`.problem`: problem (2), min_c f(K c) + c^T K c / 2, and the solvers' result type;
- :mod:`.fixed_point`: the non-linear Jacobi iteration (paper section 3);
- :mod:`.coordinate_descent`: the non-linear Gauss-Seidel sweeps (paper section 4), whose inner
  loops :mod:`.cd_loops` compiles with numba when it is installed.
The losses and their resolvents are the shared :mod:`kernelscale.losses`.
"""

from .coordinate_descent import RULES, kernel_coordinate_descent, linear_coordinate_descent
from .estimators import RegularizedKernelClassifier, RegularizedKernelRegressor
from .fixed_point import (
    FixedPointDivergenceError, SolverResult, estimate_spectral_norm, kernel_fixed_point, kernel_objective,
    linear_fixed_point,
)

__all__ = ["RegularizedKernelClassifier", "RegularizedKernelRegressor", "kernel_fixed_point",
           "linear_fixed_point", "kernel_coordinate_descent", "linear_coordinate_descent", "RULES",
           "SolverResult", "FixedPointDivergenceError", "estimate_spectral_norm", "kernel_objective"]
