"""Fuzzing every estimator's public entry points (issue 18, "one validation boundary").

For every configuration of tests/estimator_list.py, hypothesis draws cases of hostile input
(tests/estimator_fuzzing.py: extreme-but-finite values, constant columns, duplicate rows, other
dtypes, NaN/inf, 1-d/3-d/empty arrays, one class or many, NaN in y, bad sample weights,
mismatched lengths, nonsense hyperparameters set with ``set_params``) and checks that each one
gives either a *clear* refusal or a *valid* model:

- clear: a ValueError/TypeError raised by a validation module (kernelscale.base.validation,
  _estimator, _classifier, _params; scikit-learn's utils.validation, utils._param_validation,
  utils.multiclass, utils.class_weight), or one whose message names the offending argument (X, y,
  sample_weight, classes, or a hyperparameter); never a LinAlgError, ZeroDivisionError,
  OverflowError, IndexError or numpy's reshape/convert errors from inside the arithmetic;
- valid: fit (or partial_fit) succeeded although nothing in the case had to be refused, and
  predict, decision_function, predict_proba, predict_log_proba, transform and score (those that
  exist) return outputs of the right shape that are finite (predict_log_proba may be -inf where a
  probability is 0; R^2 of one sample is NaN, as scikit-learn's), with predict_proba rows on the
  simplex and predicted labels among ``classes_``.

The budget is small (a few cases per configuration, deterministic); benchmarks/tools/fuzz_estimators.py
runs the same cases for a long campaign. A failure prints the case (estimator and seed): replay it
with ``run_case(make_case(index, seed))``.
"""

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from estimator_fuzzing import ESTIMATOR_IDS, ESTIMATORS, cases, make_case, regression_cases, run_case

#: cases per estimator configuration: with 36 configurations the file runs in ~30 s on 2 cores
MAX_EXAMPLES = 200


@pytest.mark.parametrize("index", range(len(ESTIMATORS)), ids=ESTIMATOR_IDS)
def test_every_case_is_a_clear_refusal_or_a_valid_model(index):
    def check(case):
        outcome, detail = run_case(case)
        assert outcome in ("refused", "valid"), f"{outcome}: {detail}\ncase: {case.describe()}"

    check = given(case=cases(index))(check)
    for case in regression_cases(index):  # the explicit phase: issue 39's inputs, every time
        check = example(case=case)(check)
    settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
             phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))(check)()


@pytest.mark.parametrize("index", range(len(ESTIMATORS)), ids=ESTIMATOR_IDS)
def test_the_regression_cases_of_issue_39(index):
    """The explicit cases are refused where they must be, and the refused ones name what was wrong."""
    for case in regression_cases(index):
        outcome, detail = run_case(case)
        must = case.must_refuse_fit + case.must_refuse_test
        assert outcome == ("refused" if must else "valid") or (not must and outcome == "refused"), (
            f"{outcome}: {detail}\ncase: {case.describe()}")
        if must:
            expected = {"class_weight": "class_weight", "mixes": "y mixes strings", "alpha": "alpha",
                        "tensor": "torch tensor"}
            word = next(v for k, v in expected.items() if k in " ".join(must))
            assert word in detail, f"{detail!r} does not name {word!r}\ncase: {case.describe()}"


def test_the_property_can_fail():
    """The checker flags a deep exception, an accepted invalid input and a non-finite output."""
    from sklearn.base import BaseEstimator, RegressorMixin

    import estimator_fuzzing

    class Broken(RegressorMixin, BaseEstimator):
        def __init__(self, mode="deep"):
            self.mode = mode

        def fit(self, X, y, sample_weight=None):
            if self.mode == "deep":
                return 1 / 0
            self.n_features_in_ = 1
            return self

        def predict(self, X):
            import numpy as np

            return np.full(len(X), np.nan)

    case = make_case(0, 0)
    case.params, case.must_refuse_fit, case.must_refuse_test = {}, [], []
    original = estimator_fuzzing.ESTIMATORS[0]
    try:
        estimator_fuzzing.ESTIMATORS[0] = Broken("deep")
        assert run_case(case)[0] == "deep"
        estimator_fuzzing.ESTIMATORS[0] = Broken("nan")
        case.X, case.y, case.sample_weight, case.X_test = [[1.0], [2.0]], [1.0, 2.0], None, [[1.0], [2.0]]
        case.y_test = [1.0, 2.0]
        outcome, detail = run_case(case)
        assert outcome == "silent" and "predict returns NaN or infinity" in detail
        case.must_refuse_fit = ["y has NaN"]
        assert run_case(case)[0] == "silent"
    finally:
        estimator_fuzzing.ESTIMATORS[0] = original


def test_deep_errors_are_told_from_clear_ones():
    import numpy as np

    from estimator_fuzzing import is_clear

    def raised(fn):
        try:
            fn()
        except Exception as err:  # noqa: BLE001
            return err
        raise AssertionError("no exception")

    names = {"X", "y", "alpha"}
    assert not is_clear(raised(lambda: np.ones(4).reshape(3, -1)), names)
    assert not is_clear(raised(lambda: float("abc")), names)
    assert not is_clear(raised(lambda: np.linalg.inv(np.zeros((2, 2)))), names)
    assert is_clear(raised(lambda: (_ for _ in ()).throw(ValueError("alpha must be > 0; pass 1.0"))), names)
    from kernelscale.base.validation import as_float_array

    assert is_clear(raised(lambda: as_float_array([[np.nan]])), set())
