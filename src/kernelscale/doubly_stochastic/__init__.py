"""Paper 2, doubly stochastic functional gradients (docs/algorithms.md section 2).

:mod:`.estimators`: ``DoublyStochasticRegressor``, ``DoublyStochasticClassifier`` and the solver
functions ``dsg_iterations``, ``dsg_predict``, ``dsg_auto_sizes`` and ``dsg_memory``.
"""

from .estimators import (
    SOLVERS, DoublyStochasticClassifier, DoublyStochasticRegressor, dsg_auto_sizes, dsg_iterations,
    dsg_memory, dsg_predict,
)

__all__ = ["DoublyStochasticRegressor", "DoublyStochasticClassifier", "dsg_iterations", "dsg_auto_sizes",
           "dsg_predict", "dsg_memory", "SOLVERS"]
