"""Paper 2, doubly stochastic functional gradients (docs/algorithms.md section 2).

- :mod:`.estimators`: ``DoublyStochasticRegressor`` and ``DoublyStochasticClassifier``;
- :mod:`.fitting`: the fit / partial_fit / predict logic they share;
- :mod:`.solver`: the method on arrays, ``dsg_iterations``, ``dsg_predict`` and ``dsg_memory``;
- :mod:`.defaults`: what the "auto" parameters resolve to, ``dsg_auto_sizes``;
- :mod:`.batches`: the mini-batches, and the row chunks of a dask X they read;
- :mod:`.distributed`: the iterations on a dask X, computed where its row chunks are.
"""

from .defaults import dsg_auto_sizes
from .estimators import DoublyStochasticClassifier, DoublyStochasticRegressor
from .fitting import SOLVERS
from .solver import dsg_iterations, dsg_memory, dsg_predict

__all__ = ["DoublyStochasticRegressor", "DoublyStochasticClassifier", "dsg_iterations", "dsg_auto_sizes",
           "dsg_predict", "dsg_memory", "SOLVERS"]
