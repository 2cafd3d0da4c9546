"""Paper 5, least squares revisited (docs/algorithms.md section 5).

- :mod:`.estimators`: ``GeneralizedLeastSquaresClassifier``, ``CalibratedLeastSquaresClassifier``
  and the solver functions on a given design matrix (Algorithms 1 and 2);
- :mod:`.stagewise`: ``StagewiseClassifier``, ``StagewiseRegressor``: stagewise regression on
  seeded random-feature blocks (Algorithm 3).
"""

from .estimators import (
    BASIS_FUNCTIONS, CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier, calibrated_least_squares,
    calibrated_predict, generalized_least_squares, gls_fixed_bytes,
)
from .stagewise import StagewiseClassifier, StagewiseRegressor, feature_spec, stagewise_regression

__all__ = ["GeneralizedLeastSquaresClassifier", "CalibratedLeastSquaresClassifier", "generalized_least_squares",
           "calibrated_least_squares", "calibrated_predict", "BASIS_FUNCTIONS", "gls_fixed_bytes",
           "StagewiseClassifier", "StagewiseRegressor", "feature_spec", "stagewise_regression"]
