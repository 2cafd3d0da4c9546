"""Paper 4, the multi-class LS-SVM with randomized block solvers (docs/algorithms.md section 4).

- :mod:`.estimators`: ``LSSVMClassifier``, ``LSSVMRegressor`` and ``solve_lssvm`` (Nystrom
  committee, block Kaczmarz, block matching pursuit, hybrid, exact);
- :mod:`.distributed`: the system Theta of eq. 17 over the row chunks of dask arrays.
"""

from .estimators import (
    SOLVERS, LSSVMClassifier, LSSVMRegressor, LSSVMSolution, exact_weighted_lssvm, lssvm_fit_memory,
    lssvm_theta, solve_lssvm,
)

__all__ = ["LSSVMClassifier", "LSSVMRegressor", "solve_lssvm", "exact_weighted_lssvm", "lssvm_fit_memory",
           "lssvm_theta", "LSSVMSolution", "SOLVERS"]
