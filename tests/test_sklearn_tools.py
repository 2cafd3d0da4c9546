"""scikit-learn's tools around every estimator (issue 39, item 2): searches over the parameters
of a kernel given by name (``kernel__sigma`` with ``kernel="gaussian"``), and probabilities for
scoring, calibration and soft voting."""

import warnings

import numpy as np
import pytest
from estimator_list import ESTIMATORS as CONFIGURED
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import VotingClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

import kernelscale
from kernelscale.kernels import GaussianKernel, LaplacianKernel, PolynomialKernel
from kernelscale.registry import ESTIMATORS

#: every registered estimator with a ``kernel`` parameter
WITH_KERNEL = [entry for entry in ESTIMATORS if "kernel" in entry.cls().get_params(deep=False)]
#: those whose kernel is Gaussian by default (PolynomialRandomFeatures' is polynomial)
GAUSSIAN = [entry for entry in WITH_KERNEL if entry.cls().get_params()["kernel"] == "gaussian"]
CLASSIFIERS = [entry for entry in ESTIMATORS if entry.kind == "classifier"]


def _config(cls):
    """The first small configuration of ``cls`` in tests/estimator_list.py (a clone)."""
    return clone(next(est for est in CONFIGURED if type(est) is cls))


def _data(kind, n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if kind == "classifier":
        return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1]


def test_every_kernel_estimator_is_covered():
    without = {entry.name for entry in ESTIMATORS} - {entry.name for entry in WITH_KERNEL}
    # linear models, and the front doors that choose the kernel themselves
    assert without == {"GeneralizedLeastSquaresClassifier", "CalibratedLeastSquaresClassifier",
                       "AutoKernelClassifier", "AutoKernelRegressor"}
    assert {entry.name for entry in WITH_KERNEL} - {entry.name for entry in GAUSSIAN} == {"PolynomialRandomFeatures"}


@pytest.mark.parametrize("entry", GAUSSIAN, ids=lambda e: e.name)
def test_grid_search_over_the_sigma_of_a_kernel_given_by_name(entry):
    """The first grid a user writes: ``kernel__sigma`` with the default ``kernel="gaussian"``. A
    bandwidth of 1e-3 (every kernel value between distinct points is 0) loses to 1.0 everywhere;
    the best estimator is refitted with that sigma."""
    est = _config(entry.cls).set_params(kernel="gaussian")
    assert est.kernel == "gaussian"
    grid = {"kernel__sigma": [1e-3, 1.0]}
    kind = entry.kind
    if kind == "transformer":  # searched inside a pipeline with a linear model
        kind = "regressor"
        est = make_pipeline(est, Ridge(alpha=1e-3))
        grid = {f"{est.steps[0][0]}__kernel__sigma": grid["kernel__sigma"]}
    X, y = _data(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = GridSearchCV(est, grid, cv=3, error_score="raise").fit(X, y)
    key = next(iter(grid))
    assert search.best_params_ == {key: 1.0}, search.cv_results_["mean_test_score"]
    best = search.best_estimator_
    model = best.steps[0][1] if kind != entry.kind else best
    assert isinstance(model.kernel, GaussianKernel) and model.kernel.sigma == 1.0
    assert isinstance(model.kernel_, GaussianKernel) and model.kernel_.sigma == 1.0
    searched = est.steps[0][1] if kind != entry.kind else est
    assert searched.kernel == "gaussian"  # the search worked on clones


def test_grid_search_over_the_degree_of_a_default_kernel():
    """PolynomialRandomFeatures' kernel=None stands for PolynomialKernel(degree=2, gamma=1, coef0=1)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 2))
    y = X[:, 0] ** 3 - X[:, 1] ** 3  # degree 3 needed
    est = make_pipeline(kernelscale.PolynomialRandomFeatures(n_components=256, random_state=0), Ridge(alpha=1e-6))
    search = GridSearchCV(est, {"polynomialrandomfeatures__kernel__degree": [1, 3]}, cv=3).fit(X, y)
    assert search.best_params_ == {"polynomialrandomfeatures__kernel__degree": 3}
    kernel = search.best_estimator_.steps[0][1].kernel_
    assert isinstance(kernel, PolynomialKernel) and (kernel.degree, kernel.gamma, kernel.coef0) == (3, 1.0, 1.0)
    named = kernelscale.PolynomialRandomFeatures(kernel="polynomial").set_params(kernel__gamma=0.5)
    assert named.kernel.get_params() == PolynomialKernel(gamma=0.5).get_params()


def test_set_params_of_a_named_kernel_keeps_scikit_learns_conventions():
    est = kernelscale.ExactKernelRidge()
    assert est.get_params()["kernel"] == "gaussian"  # __init__ stores the name unchanged
    assert est.set_params(kernel__sigma=2.0) is est
    assert isinstance(est.kernel, GaussianKernel) and est.kernel.sigma == 2.0
    assert clone(est).kernel.sigma == 2.0 and clone(est).kernel is not est.kernel
    # the name and its parameters in one call, in any order; case as make_kernel takes it
    est = kernelscale.SLKLRegressor().set_params(kernel__sigma=3.0, kernel="Laplacian")
    assert isinstance(est.kernel, LaplacianKernel) and est.kernel.sigma == 3.0
    # a kernel object is set as scikit-learn does
    shared = GaussianKernel(sigma=1.0)
    est = kernelscale.ExactKernelRidge(kernel=shared).set_params(kernel__sigma=4.0)
    assert est.kernel is shared and shared.sigma == 4.0
    # a parameter the named kernel has not: scikit-learn's error, naming it
    with pytest.raises(ValueError, match="sigma"):
        kernelscale.ExactKernelRidge(kernel="linear").set_params(kernel__sigma=1.0)
    with pytest.raises(ValueError, match="kernel"):
        kernelscale.ExactKernelRidge().set_params(kernel="nonsense", kernel__sigma=1.0)


# ----------------------------------------------------------------------------------------------
# probabilities


def _proba_config(entry):
    """A configuration of the classifier with predict_proba (the logistic loss where the hinge
    loss has none by design: its docstring says why)."""
    est = _config(entry.cls)
    if not hasattr(est, "predict_proba"):
        est.set_params(loss="logistic")
    return est


@pytest.mark.parametrize("entry", CLASSIFIERS, ids=lambda e: e.name)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_classifier_has_predict_proba(entry, n_classes):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 3))
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.4, 0.4] if n_classes == 3 else [0.0])
    est = _proba_config(entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    P = est.predict_proba(X)
    assert P.shape == (150, n_classes)
    assert P.min() >= 0 and np.allclose(P.sum(axis=1), 1.0)
    np.testing.assert_array_equal(est.classes_[P.argmax(axis=1)], est.predict(X))
    assert np.mean(est.predict(X) == y) > 0.7


@pytest.mark.parametrize("entry", CLASSIFIERS, ids=lambda e: e.name)
def test_probability_scorers_calibration_and_soft_voting(entry):
    X, y = _data("classifier", n=150)
    est = _proba_config(entry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auc = cross_val_score(est, X, y, cv=3, scoring="roc_auc", error_score="raise")
        loss = cross_val_score(est, X, y, cv=3, scoring="neg_log_loss", error_score="raise")
        calibrated = CalibratedClassifierCV(clone(est), cv=3).fit(X, y)
        voting = VotingClassifier([("model", clone(est)), ("logistic", LogisticRegression())], voting="soft").fit(X, y)
    assert np.all(auc > 0.8) and np.all(np.isfinite(loss)) and np.all(loss < 0)
    for model in (calibrated, voting):
        P = model.predict_proba(X)
        assert np.allclose(P.sum(axis=1), 1.0) and np.mean(model.predict(X) == y) > 0.8
