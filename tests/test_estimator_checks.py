"""scikit-learn's estimator checks over every public estimator (listed in estimator_list.py)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from estimator_list import ESTIMATORS, expected_failed_checks


@pytest.mark.filterwarnings("ignore:n_components=.* > n_samples")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # tiny max_iter on purpose
@pytest.mark.filterwarnings("ignore:batch_size=")  # clipped to the tiny check datasets
@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)
