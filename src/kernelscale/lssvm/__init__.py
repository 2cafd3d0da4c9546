"""Paper 4, the multi-class LS-SVM with randomized block solvers (docs/algorithms.md section 4).

- :mod:`.system`: the system Theta W = Z of eqs. 16-19, its row blocks, bias border and diagonal;
- :mod:`.cholesky`: the Cholesky solves of a block's Gram matrix and of the whole system;
- :mod:`.solvers`: ``solve_lssvm`` (Nystrom committee, block Kaczmarz, block matching pursuit,
  hybrid, exact);
- :mod:`.memory`: what a fit allocates (``lssvm_fit_memory``) and the block size "auto" picks;
- :mod:`.distributed`: the system Theta over the row chunks of dask arrays;
- :mod:`.estimators`: ``LSSVMClassifier``, ``LSSVMRegressor``.
"""

from .estimators import LSSVMClassifier, LSSVMRegressor
from .memory import lssvm_fit_memory
from .solvers import SOLVERS, LSSVMSolution, exact_weighted_lssvm, solve_lssvm
from .system import lssvm_theta

__all__ = ["LSSVMClassifier", "LSSVMRegressor", "solve_lssvm", "exact_weighted_lssvm", "lssvm_fit_memory",
           "lssvm_theta", "LSSVMSolution", "SOLVERS"]
