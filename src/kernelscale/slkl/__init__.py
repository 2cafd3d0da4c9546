"""Paper 1, SLKL: stochastic low-rank kernel learning (docs/algorithms.md section 1).

- :mod:`.estimators`: ``SLKLRegressor``, ``SLKLClassifier`` and the solver functions
  ``slkl`` (over kernel columns) and ``slkl_gram`` (over the M x M Gram of the candidates);
- :mod:`.loop`: the coordinate visits, compiled by numba when it is installed;
- :mod:`.woodbury`: the bookkeeping of G = (D^-1 + C^T C / lam)^-1 (eqs. 22-27).
"""

from .estimators import (
    ArrayColumns, KernelColumns, SLKLClassifier, SLKLRegressor, SLKLResult, exact_step, gram_of_columns,
    newton_step, slkl, slkl_gram, step_change,
)

__all__ = ["SLKLRegressor", "SLKLClassifier", "slkl", "slkl_gram", "gram_of_columns", "SLKLResult",
           "ArrayColumns", "KernelColumns", "exact_step", "newton_step", "step_change"]
