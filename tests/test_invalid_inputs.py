"""Regression tests of issue 39, item 4: the invalid inputs a new user tried are refused at the
boundary with a ValueError (TypeError for a type) naming the argument and the fix, for every
estimator they reach (classifiers: all seven; X: every estimator of tests/estimator_list.py).
The same cases are among the fuzzers' generators (tests/estimator_fuzzing.py)."""

import warnings

import numpy as np
import pytest
from estimator_list import ESTIMATORS as CONFIGURED
from sklearn.base import clone, is_classifier, is_regressor

import kernelscale
from kernelscale.base.estimator import check_class_weight, warm_start_from
from kernelscale.base.validation import check_label_types, check_positive
from kernelscale.registry import ESTIMATORS

CLASSIFIERS = [entry.cls for entry in ESTIMATORS if entry.kind == "classifier"]
#: the classifiers with class_weight (the seven of the five papers; the AutoKernelClassifier
#: front door has none)
WEIGHTED = [cls for cls in CLASSIFIERS if "class_weight" in cls().get_params()]
SMALL = {  # fast configurations of the classifiers
    "SLKLClassifier": dict(n_components=20, random_state=0),
    "DoublyStochasticClassifier": dict(n_iter=10, batch_size=64, block_size=16, random_state=0),
    "RegularizedKernelClassifier": dict(random_state=0),
    "StagewiseClassifier": dict(n_stages=2, block_size=16, random_state=0),
    "LSSVMClassifier": dict(n_iter=10, batch_size=16, random_state=0),
    "GeneralizedLeastSquaresClassifier": dict(max_iter=10),
    "CalibratedLeastSquaresClassifier": dict(max_iter=5),
    "AutoKernelClassifier": dict(time_budget=2.0, random_state=0),
}


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


def test_every_classifier_is_covered():
    assert sorted(cls.__name__ for cls in CLASSIFIERS) == sorted(SMALL)
    assert len(WEIGHTED) == 7


BAD_CLASS_WEIGHTS = [
    ({0: -1}, r"class_weight\[0\] is -1;.*finite numbers >= 0"),
    ({0: np.nan}, r"class_weight\[0\] is nan;.*finite numbers >= 0"),
    ({0: np.inf}, r"class_weight\[0\] is inf;.*finite numbers >= 0"),
    ({1: 10**400}, r"class_weight\[1\] is ~10\*\*400;"),
    ({0: "heavy"}, r"class_weight\[0\] is 'heavy';"),
    ({0: 0, 1: 0}, r"class_weight=\{0: 0, 1: 0\} weighs every class of y \(0, 1\) 0"),
    ({0: 0.0, 1: -0.0}, r"weighs every class of y"),
]


@pytest.mark.parametrize("cls", WEIGHTED, ids=lambda c: c.__name__)
@pytest.mark.parametrize("class_weight, message", BAD_CLASS_WEIGHTS, ids=lambda v: str(v)[:20])
def test_invalid_class_weights_are_refused_by_every_classifier(cls, class_weight, message):
    X, y = _data()
    with pytest.raises(ValueError, match=message):
        cls(class_weight=class_weight, **SMALL[cls.__name__]).fit(X, y)


@pytest.mark.parametrize("cls", WEIGHTED, ids=lambda c: c.__name__)
def test_class_weights_that_leave_no_positive_weight_are_refused(cls):
    """Class 1 weighs 0 and the samples of class 0 weigh 0: nothing is left to fit."""
    X, y = _data()
    with pytest.raises(ValueError, match="class_weight is 0 for every sample"):
        cls(class_weight={1: 0}, **SMALL[cls.__name__]).fit(X, y, sample_weight=(y == 1).astype(float))


@pytest.mark.parametrize("cls", WEIGHTED, ids=lambda c: c.__name__)
def test_valid_class_weights_still_fit(cls):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for class_weight in ({0: 0, 1: 1}, {0: 2.5, 1: np.float32(1)}, {1: 3}, "balanced"):
            est = cls(class_weight=class_weight, **SMALL[cls.__name__]).fit(X, y)
            assert np.isin(est.predict(X), [0, 1]).all()


def test_check_class_weight_directly():
    assert check_class_weight(None) is None and check_class_weight("balanced") == "balanced"
    assert check_class_weight({0: 0, 1: 2}, np.array([0, 1])) == {0: 0, 1: 2}
    assert check_class_weight({"a": 0}, np.array(["a", "b"])) == {"a": 0}  # "b" weighs 1
    with pytest.raises(ValueError, match="weighs every class"):
        check_class_weight({"a": 0, "b": 0}, np.array(["a", "b"]))
    with pytest.raises(ValueError, match="class_weight\\['a'\\]"):
        check_class_weight({"a": True}, np.array(["a", "b"]))


@pytest.mark.parametrize("cls", CLASSIFIERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("labels", [
    np.array([1, "a"] * 30, dtype=object),
    np.array(["a", 1] * 30, dtype=object),
    np.array(["a", 2.5, b"b"] * 20, dtype=object),
], ids=["int-first", "str-first", "float"])
def test_mixed_int_and_str_labels_are_refused_naming_y(cls, labels):
    X, _ = _data()
    with pytest.raises(ValueError, match=r"y mixes strings with other labels .*astype\(str\)"):
        cls(**SMALL[cls.__name__]).fit(X, labels)


def test_mixed_labels_of_partial_fit_and_its_classes_are_refused():
    X, _ = _data()
    est = kernelscale.DoublyStochasticClassifier(n_iter=5, random_state=0)
    mixed = np.array(["a", 1] * 30, dtype=object)
    with pytest.raises(ValueError, match="classes mixes strings"):
        est.partial_fit(X, np.array(["a", "b"] * 30), classes=np.array(["a", 1], dtype=object))
    with pytest.raises(ValueError, match="y mixes strings"):
        est.partial_fit(X, mixed, classes=np.array(["a", "b"]))
    assert check_label_types(np.array(["a", "b"], dtype=object)).size == 2  # one type: accepted
    assert check_label_types(np.array([1, 2.0], dtype=object)).size == 2


def test_string_labels_of_one_type_still_fit():
    X, y = _data()
    labels = np.where(y == 1, "yes", "no").astype(object)
    for cls in CLASSIFIERS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = cls(**SMALL[cls.__name__]).fit(X, labels)
        assert set(est.predict(X)) <= {"yes", "no"}


def test_exact_kernel_ridge_takes_a_huge_integer_alpha_as_the_float_it_is():
    X, y = _data()
    big = kernelscale.ExactKernelRidge(alpha=10**30).fit(X, y.astype(float))
    ref = kernelscale.ExactKernelRidge(alpha=1e30).fit(X, y.astype(float))
    np.testing.assert_array_equal(big.predict(X), ref.predict(X))
    assert np.all(np.abs(big.predict(X)) < 1e-20)  # the ridge dominates: c = (K + alpha I)^-1 y ~ y / alpha


@pytest.mark.parametrize("est", [
    kernelscale.ExactKernelRidge(alpha=10**400),
    kernelscale.SLKLRegressor(alpha=10**400),
    kernelscale.DoublyStochasticRegressor(n_iter=10**400),
    kernelscale.RegularizedKernelRegressor(C=10**400),
    kernelscale.RandomFourierFeatures(n_components=10**400),
], ids=lambda e: type(e).__name__)
def test_integers_beyond_the_float_range_are_refused_naming_the_parameter(est):
    X, y = _data()
    name = next(k for k, v in est.get_params(deep=False).items() if isinstance(v, int) and abs(v) > 10**300)
    with pytest.raises(ValueError, match=rf"{name}=~10\*\*400 is beyond the float range.*pass a smaller {name}"):
        est.fit(X, y.astype(float)) if is_regressor(est) else est.fit(X)


def test_kernel_parameters_beyond_the_float_range_are_refused_naming_them():
    X, y = _data()
    with pytest.raises(ValueError, match=r"sigma must be finite and > 0 .* got ~10\*\*400"):
        kernelscale.ExactKernelRidge(kernel=kernelscale.GaussianKernel(sigma=10**400)).fit(X, y.astype(float))
    assert check_positive(10**30, "alpha") == 10**30
    with pytest.raises(ValueError, match="degree must be finite"):
        check_positive(10**400, "degree", integer=True)


@pytest.mark.parametrize("cls", [kernelscale.RegularizedKernelClassifier, kernelscale.RegularizedKernelRegressor],
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize("kernel", ["gaussian", "linear"])
def test_a_warm_start_on_another_number_of_rows_fits_from_scratch_with_a_warning(cls, kernel):
    X, y = _data(120)
    y = y if is_classifier(cls()) else X[:, 0] - X[:, 1]
    warm = cls(kernel=kernel, warm_start=True, tol=1e-7, max_iter=5000, random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match=r"warm_start=True, but the previous model's dual_coef_ .* starts from "
                                         r"scratch"):
        warm.fit(X[:90], y[:90])
    cold = cls(kernel=kernel, tol=1e-7, max_iter=5000, random_state=0).fit(X[:90], y[:90])
    np.testing.assert_allclose(warm.dual_coef_, cold.dual_coef_, atol=1e-6)
    np.testing.assert_allclose(warm.predict(X) if is_regressor(warm) else warm.decision_function(X),
                               cold.predict(X) if is_regressor(cold) else cold.decision_function(X), atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same rows again: a warm start, without a warning
        warm.fit(X[:90], y[:90])


def test_warm_start_from_directly():
    assert warm_start_from(None, (3, 1), "c") is None
    np.testing.assert_array_equal(warm_start_from(np.arange(3.0), (3, 1), "c"), [[0.0], [1.0], [2.0]])
    with pytest.warns(UserWarning, match="has shape \\(4,\\) and this fit needs \\(3, 1\\)"):
        assert warm_start_from(np.arange(4.0), (3, 1), "c") is None
    with pytest.warns(UserWarning):
        assert warm_start_from(np.zeros((3, 2)), (3, 1), "c") is None


# ----------------------------------------------------------------------------------------------
# torch tensors numpy cannot hold


torch = pytest.importorskip("torch", reason="torch is not installed")
IDS = [f"{i:02d}-{type(e).__name__}" for i, e in enumerate(CONFIGURED)]


def _fit_args(est, X):
    if is_classifier(est):
        return X, np.arange(X.shape[0]) % 2
    if is_regressor(est):
        return X, np.linspace(0.0, 1.0, X.shape[0])
    return (X,)


@pytest.mark.parametrize("est", CONFIGURED, ids=IDS)
def test_a_meta_tensor_as_X_is_refused_naming_X(est):
    X = torch.empty(40, 3, device="meta")
    with pytest.raises(ValueError, match=r"X is a torch tensor on the 'meta' device.*pass X with data"):
        clone(est).fit(*_fit_args(est, X))


@pytest.mark.parametrize("est", CONFIGURED, ids=IDS)
def test_a_bfloat16_tensor_as_X_is_refused_naming_X_and_what_to_pass(est):
    X = torch.ones(40, 3, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"X is a torch tensor of dtype torch.bfloat16.*pass X.float\(\)"):
        clone(est).fit(*_fit_args(est, X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = clone(est).fit(*_fit_args(est, torch.randn(40, 3, generator=torch.Generator().manual_seed(0))))
    method = next(m for m in ("predict", "transform") if hasattr(fitted, m))
    with pytest.raises(TypeError, match="X is a torch tensor of dtype torch.bfloat16"):
        getattr(fitted, method)(X)
    with pytest.raises(ValueError, match="X is a torch tensor on the 'meta' device"):
        getattr(fitted, method)(torch.empty(5, 3, device="meta"))


def test_tensors_as_y_and_sample_weight_are_named_too():
    X, y = _data()
    est = kernelscale.ExactKernelRidge()
    with pytest.raises(ValueError, match="y is a torch tensor on the 'meta' device"):
        est.fit(X, torch.empty(60, device="meta"))
    with pytest.raises(TypeError, match="sample_weight is a torch tensor of dtype torch.bfloat16"):
        est.fit(X, y.astype(float), sample_weight=torch.ones(60, dtype=torch.bfloat16))
