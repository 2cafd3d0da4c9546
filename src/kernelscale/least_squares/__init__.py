"""Paper 5, least squares revisited (docs/algorithms.md section 5).

- :mod:`.estimators`: ``GeneralizedLeastSquaresClassifier``, ``CalibratedLeastSquaresClassifier``;
- :mod:`.generalized`: Algorithm 1 (generalized least squares, eq. 14) on a given design matrix;
- :mod:`.calibrated`: Algorithm 2 (calibrated least squares, eqs. 18-19) and its prediction replay;
- :mod:`.ridge`: what Algorithms 1 and 2 share: Sigma, its ``alpha="auto"`` ridge (generalized
  cross-validation) and its factorisation once per fit;
- :mod:`.stagewise`: ``StagewiseClassifier``, ``StagewiseRegressor``;
- :mod:`.stagewise_solver`: Algorithm 3, stagewise regression on seeded random-feature blocks.

The solvers state their passes over rows against the row executors of :mod:`kernelscale.ops.rows`,
so one code path serves numpy arrays and dask arrays. Estimators parse ``max_memory`` once per fit;
the solver functions take the budget in bytes (``budget=``).
"""

from .calibrated import BASIS_FUNCTIONS, calibrated_least_squares, calibrated_predict
from .estimators import CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier
from .generalized import generalized_least_squares, gls_fixed_bytes
from .stagewise import StagewiseClassifier, StagewiseRegressor
from .stagewise_solver import feature_spec, stage_store_bytes, stagewise_fit_bytes, stagewise_regression

__all__ = ["GeneralizedLeastSquaresClassifier", "CalibratedLeastSquaresClassifier", "generalized_least_squares",
           "calibrated_least_squares", "calibrated_predict", "BASIS_FUNCTIONS", "gls_fixed_bytes",
           "StagewiseClassifier", "StagewiseRegressor", "feature_spec", "stage_store_bytes", "stagewise_fit_bytes",
           "stagewise_regression"]
