"""Paper 1, SLKL: stochastic low-rank kernel learning (docs/algorithms.md section 1).

- :mod:`.estimators`: ``SLKLRegressor`` and ``SLKLClassifier`` (validation, budget, candidates);
- :mod:`.solver`: the solvers ``slkl`` (over candidate columns) and ``slkl_gram`` (over the
  M x M Gram matrix of the candidates), and their ``SLKLResult``;
- :mod:`.columns`: the candidate columns (``ArrayColumns``, ``KernelColumns``), their Gram
  matrix (``gram_of_columns``) and the column mode a budget allows;
- :mod:`.multiclass`: one-vs-one over shared candidates from per-class Gram sums, and the
  memory plan that chooses between one-vs-one and one-vs-rest;
- :mod:`.loop`: the coordinate visits and step rules, compiled by numba when it is installed;
- :mod:`.woodbury`: the bookkeeping of G = (D^-1 + C^T C / lam)^-1 (eqs. 22-27).

The Gram sums of a fit are row executors' sum functions (:mod:`kernelscale.ops.rows`): the same
code runs on host arrays and over dask row chunks, so the family has no separate distributed module.
"""

from .columns import ArrayColumns, KernelColumns, gram_of_columns
from .estimators import SLKLClassifier, SLKLRegressor
from .loop import exact_step, line_search_step, newton_step, step_change
from .solver import SLKLResult, slkl, slkl_gram

__all__ = ["SLKLRegressor", "SLKLClassifier", "slkl", "slkl_gram", "gram_of_columns", "SLKLResult",
           "ArrayColumns", "KernelColumns", "line_search_step", "exact_step", "newton_step", "step_change"]
