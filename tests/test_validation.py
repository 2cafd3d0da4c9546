"""Shared validation: dtype rules and error messages that name the argument and the fix."""

import numpy as np
import pytest

from kernelscale.base.validation import as_float_array, check_positive, check_same_features, result_dtype


def test_float32_kept_integers_promoted_to_float64():
    assert as_float_array(np.ones((2, 2), np.float32)).dtype == np.float32
    assert as_float_array(np.ones((2, 2), np.uint8)).dtype == np.float64
    assert as_float_array([[1, 2]]).dtype == np.float64


def test_input_is_not_altered_or_copied_needlessly():
    X = np.arange(6.0).reshape(3, 2)
    out = as_float_array(X)
    assert out is X or np.shares_memory(out, X)
    np.testing.assert_array_equal(X, np.arange(6.0).reshape(3, 2))


@pytest.mark.parametrize(
    "X, error, fragment",
    [([[np.nan, 1.0]], ValueError, "impute"), ([[np.inf, 1.0]], ValueError, "NaN or infinity"),
     (np.zeros((0, 2)), ValueError, "at least one sample"), ([["x", 1]], TypeError, "numbers"),
     (np.array([[1 + 2j]]), TypeError, "not numeric")],
)
def test_errors_name_argument_and_fix(X, error, fragment):
    with pytest.raises(error, match=fragment) as info:
        as_float_array(X, "X_train")
    assert "X_train" in str(info.value)


def test_result_dtype():
    f32, f64 = np.ones(1, np.float32), np.ones(1)
    assert result_dtype(f32, f32) == np.float32
    assert result_dtype(f32, f64) == np.float64


@pytest.mark.parametrize("value", [0, -1.0, np.nan, np.inf])
def test_check_positive_rejects(value):
    with pytest.raises(ValueError, match="alpha must be finite and > 0"):
        check_positive(value, "alpha")


def test_check_positive_types():
    assert check_positive(0, "tol", allow_zero=True) == 0
    with pytest.raises(TypeError, match="n_iter must be an integer"):
        check_positive(2.5, "n_iter", integer=True)
    with pytest.raises(TypeError, match="alpha must be a number"):
        check_positive("1", "alpha")
    with pytest.raises(TypeError):
        check_positive(True, "alpha")


def test_check_same_features():
    with pytest.raises(ValueError, match="3 features, but 4 were expected"):
        check_same_features(np.ones((2, 3)), 4)


def test_conversion_errors_of_scikit_learns_validation_name_the_argument():
    from sklearn.linear_model import Ridge

    from kernelscale.base.validation import check_sample_weight, validate_data

    X = np.array([[1.0, "abc"], [2.0, 3.0]], dtype=object)
    with pytest.raises(TypeError, match=r"^X must hold numbers only \(could not convert string to float: 'abc'\)"):
        validate_data(Ridge(), X)
    with pytest.raises(TypeError, match=r"^y must hold numbers only"):
        validate_data(Ridge(), np.ones((2, 2)), np.array(["1", {}], dtype=object), y_numeric=True)
    with pytest.raises(TypeError, match=r"^y has dtype <U1, but a regressor needs numeric targets"):
        validate_data(Ridge(), np.ones((2, 2)), np.array(["a", "b"]), y_numeric=True)
    X_dict = np.ones((2, 2), dtype=object)
    X_dict[0, 0] = {"foo": "bar"}  # scikit-learn's check_dtype_object matches this message
    with pytest.raises(TypeError, match=r"argument must be a string.* number"):
        validate_data(Ridge(), X_dict)
    with pytest.raises(TypeError, match=r"^sample_weight must hold numbers only"):
        check_sample_weight(np.array(["x", "y"], dtype=object), np.ones((2, 2)))
    with pytest.raises(ValueError, match="Found input variables with inconsistent"):  # other errors unchanged
        validate_data(Ridge(), np.ones((2, 2)), np.ones(3))
    out = validate_data(Ridge(), np.ones((2, 2)), np.array(["1.5", "2"], dtype=object), y_numeric=True)
    assert out[1].dtype == np.float64  # numeric strings in an object y convert, as in scikit-learn
