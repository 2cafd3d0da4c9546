"""A fit never corrupts a fitted model (issue 19, items 3, 7 and 8) for the kernel-expansion
estimators (ExactKernelRidge, LS-SVM, SLKL, RegularizedKernel*), the doubly stochastic ones
(``partial_fit`` too), the stagewise and least-squares ones and the feature transformers.

A refit that fails (bad input) or is interrupted (KeyboardInterrupt, from a callback or, for the
exact solvers, from the dense solve) leaves every attribute of the previous model as it was, the
same objects with the same values; an interrupted fresh fit leaves the estimator unfitted. A
finite X whose predictions overflow is refused naming X. A classifier with many classes refuses
a too small ``max_memory`` before it allocates any array with one column per class.
"""

import re
import tracemalloc
import warnings

import numpy as np
import pytest
from estimator_list import ESTIMATORS
from sklearn.base import clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

import kernelscale.exact
import kernelscale.features
from kernelscale.doubly_stochastic.estimators import DoublyStochasticClassifier, DoublyStochasticRegressor
from kernelscale.exact import ExactKernelRidge
from kernelscale.features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures
from kernelscale.kernels import PolynomialKernel
from kernelscale.least_squares.estimators import (
    CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier,
)
from kernelscale.lssvm.estimators import LSSVMClassifier, LSSVMRegressor
from kernelscale.regularized.estimators import RegularizedKernelClassifier, RegularizedKernelRegressor
from kernelscale.slkl.estimators import SLKLClassifier, SLKLRegressor
from kernelscale.least_squares.stagewise import StagewiseClassifier, StagewiseRegressor

OWN = (ExactKernelRidge, LSSVMClassifier, LSSVMRegressor, SLKLClassifier, SLKLRegressor,
       RegularizedKernelClassifier, RegularizedKernelRegressor, DoublyStochasticClassifier,
       DoublyStochasticRegressor, StagewiseClassifier, StagewiseRegressor, RandomFourierFeatures,
       PolynomialRandomFeatures, NystromFeatures, GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier)
METHODS = ("predict", "decision_function", "predict_proba", "transform")


def _id(est):
    params = est.get_params(deep=False)
    kernel = params.get("kernel")
    tag = params.get("solver") or params.get("loss") or params.get("update") or ""
    tag += "-linear" if kernel == "linear" else ""
    return f"{type(est).__name__}-{tag}" if tag else type(est).__name__


def _iterative(est):
    return not (isinstance(est, ExactKernelRidge) or est.get_params(deep=False).get("solver") == "exact")


CASES = [pytest.param(e, id=f"{i}-{_id(e)}") for i, e in enumerate(ESTIMATORS) if isinstance(e, OWN)]
# the least-squares classifiers are left out: a warm start of a converged model runs no iteration
WARM = [p for p in CASES if _iterative(p.values[0]) and "warm_start" in p.values[0].get_params(deep=False)
        and not isinstance(p.values[0], (GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier))]
PARTIAL = [p for p in CASES if hasattr(p.values[0], "partial_fit")]
# PolynomialRandomFeatures has no failure after validating X and its parameters
FAILING = [p for p in CASES if not isinstance(p.values[0], PolynomialRandomFeatures)]


def _data(est, n=90, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5]) if is_classifier(est) else np.sin(X[:, 0]) + X[:, 1]
    return X, y


def _seeded(est, **params):
    est = clone(est).set_params(**params)
    if est.get_params(deep=False).get("random_state", 0) is None:
        est.set_params(random_state=0)
    return est


def _fit(est, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y, **kw)


def _partial_fit(est, X, y, **kw):
    if is_classifier(est):
        kw.setdefault("classes", np.unique(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.partial_fit(X, y, **kw)


def _outputs(est, X):
    return {m: getattr(est, m)(X) for m in METHODS if hasattr(est, m)}


def _snapshot(est):
    """Every attribute, and a copy of the arrays among them (to catch changes in place)."""
    state = dict(vars(est))
    copies = {k: [np.array(a, copy=True) for a in (v if isinstance(v, list) else [v])]
              for k, v in state.items() if isinstance(v, (np.ndarray, list))}
    return state, copies


def _assert_untouched(est, snapshot, what):
    state, copies = snapshot
    changed = sorted(set(vars(est)) ^ set(state))
    assert not changed, f"{what}: attributes added or deleted: {changed}"
    for name, value in state.items():
        assert vars(est)[name] is value, f"{what}: {name} was replaced"
    for name, arrays in copies.items():
        now = vars(est)[name]
        for a, b in zip(now if isinstance(now, list) else [now], arrays):
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: {name} was changed in place")


def _assert_same_outputs(est, X, before):
    for method, out in _outputs(est, X).items():
        np.testing.assert_array_equal(out, before[method], err_msg=method)


def _interrupt(est, monkeypatch):
    """Make the next fit of ``est`` raise KeyboardInterrupt: from its callback at the first
    iteration, or (the exact solvers, which have no iterations) from the dense solve, or (the
    transformers) from the construction of the feature block or the landmarks' kernel matrix."""
    if hasattr(est, "transform"):
        def interrupted_build(*args, **kwargs):
            raise KeyboardInterrupt

        name = "kernel_matrix" if isinstance(est, NystromFeatures) else "FeatureBlockSpec"
        monkeypatch.setattr(kernelscale.features, name, interrupted_build)
    elif _iterative(est):
        def interrupt(info):
            raise KeyboardInterrupt

        est.set_params(callback=interrupt)
    else:
        def interrupted_solve(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(kernelscale.exact, "_solve_spd", interrupted_solve)
    return est


def _bad_refits(est, X, y):
    """Refits that raise a ValueError, as (what, X, y, fit keywords, parameters to set); the last
    three only after X and y passed scikit-learn's validation (new labels, two new features)."""
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    X_new = np.hstack([X, X[:, :2]])
    y_new = y + 10 if is_classifier(est) else y
    yield "NaN in X", X_nan, y, {}, {}
    if hasattr(est, "transform"):  # y is ignored
        if isinstance(est, RandomFourierFeatures):
            yield "a kernel without Fourier features", X_new, y, {}, {"kernel": "polynomial"}
        if isinstance(est, NystromFeatures):
            yield "max_memory too small", X_new, y, {}, {"max_memory": 2_000}
        return
    yield "y too short", X, y[:-1], {}, {}
    yield "max_memory too small", X, y_new, {}, {"max_memory": 2_000}
    yield "negative sample_weight", X_new, y_new, {"sample_weight": -np.ones(y.size)}, {}
    if is_classifier(est):
        yield "a single class", X_new, np.zeros_like(y), {}, {}


@pytest.mark.parametrize("estimator", FAILING)
def test_failed_refit_keeps_the_model(estimator):
    X, y = _data(estimator)
    est = _fit(_seeded(estimator), X, y)
    before = _outputs(est, X)
    for what, Xb, yb, kw, params in _bad_refits(est, *_data(estimator, seed=1)):
        previous = est.get_params(deep=False)
        snapshot = _snapshot(est.set_params(**params))
        with pytest.raises(ValueError):
            _fit(est, Xb, yb, **kw)
        _assert_untouched(est, snapshot, what)
        _assert_same_outputs(est.set_params(**previous), X, before)


@pytest.mark.parametrize("estimator", CASES)
def test_interrupted_refit_keeps_the_model(estimator, monkeypatch):
    X, y = _data(estimator)
    est = _fit(_seeded(estimator), X, y)
    before = _outputs(est, X)
    with monkeypatch.context() as patch:
        snapshot = _snapshot(_interrupt(est, patch))
        X_new, y_new = _data(estimator, n=70, seed=2)
        if is_classifier(est):
            y_new = y_new + 10  # new labels
        for what, Xb in (("other samples", X_new), ("two more features", np.hstack([X_new, X_new[:, :2]]))):
            with pytest.raises(KeyboardInterrupt):
                _fit(est, Xb, y_new)
            _assert_untouched(est, snapshot, what)
    _assert_same_outputs(est, X, before)


@pytest.mark.parametrize("estimator, fit", [pytest.param(p.values[0], _fit, id=p.id) for p in CASES]
                         + [pytest.param(p.values[0], _partial_fit, id=f"partial_fit-{p.id}") for p in PARTIAL])
def test_interrupted_fresh_fit_leaves_it_unfitted(estimator, fit, monkeypatch):
    est = _interrupt(_seeded(estimator), monkeypatch)
    params = dict(vars(est))
    with pytest.raises(KeyboardInterrupt):
        fit(est, *_data(estimator))
    assert vars(est) == params, f"an interrupted {fit.__name__[1:]} set {sorted(set(vars(est)) - set(params))}"
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


@pytest.mark.parametrize("estimator", WARM)
def test_interrupted_warm_start_keeps_the_previous_model(estimator, monkeypatch):
    X, y = _data(estimator)
    params = {"warm_start": True}
    grow = {name: 2 * estimator.get_params()[name] for name in ("n_iter", "n_stages") if name in estimator.get_params()}
    reference = _fit(_seeded(estimator, **params), X, y)
    est = _fit(_seeded(estimator, **params), X, y)
    before = _outputs(est, X)
    _interrupt(est.set_params(**grow), monkeypatch)
    snapshot = _snapshot(est)
    with pytest.raises(KeyboardInterrupt):
        _fit(est, X, y)
    _assert_untouched(est, snapshot, "warm start")
    _assert_same_outputs(est, X, before)
    # the continuation is the one the interrupted attempt would have been
    _fit(est.set_params(callback=None), X, y)
    _fit(reference.set_params(**grow), X, y)
    _assert_same_outputs(est, X, _outputs(reference, X))
    assert est.n_iter_ == reference.n_iter_


@pytest.mark.parametrize("estimator", PARTIAL)
def test_failed_or_interrupted_partial_fit_keeps_the_model(estimator, monkeypatch):
    X, y = _data(estimator)
    est = _seeded(estimator)
    for _ in range(3):  # a doubly stochastic store of 4 blocks, 3 fitted: spare capacity
        _partial_fit(est, X, y)
    before = _outputs(est, X)
    X1, y1 = _data(estimator, seed=1)
    X_nan = X1.copy()
    X_nan[3, 1] = np.nan
    bad = [("NaN in X", X_nan, y1, {}), ("y too short", X1, y1[:-1], {}),
           ("two more features", np.hstack([X1, X1[:, :2]]), y1, {}),
           ("negative sample_weight", X1, y1, {"sample_weight": -np.ones(y1.size)})]
    if is_classifier(est):
        bad.append(("a new label", X1, y1 + 10, {"classes": None}))
    for what, Xb, yb, kw in bad:
        snapshot = _snapshot(est)
        with pytest.raises(ValueError):
            _partial_fit(est, Xb, yb, **kw)
        _assert_untouched(est, snapshot, what)
        _assert_same_outputs(est, X, before)
    snapshot = _snapshot(_interrupt(est, monkeypatch))
    with pytest.raises(KeyboardInterrupt):
        _partial_fit(est, X1, y1)
    _assert_untouched(est, snapshot, "interrupted")
    _assert_same_outputs(est, X, before)


# --------------------------------------------------------------------------------------------
# item 7: finite input, finite output


@pytest.mark.parametrize("estimator", [
    ExactKernelRidge(PolynomialKernel(degree=3), alpha=1.0),
    LSSVMRegressor(PolynomialKernel(degree=3), C=1.0, batch_size=16, n_iter=10, random_state=0),
    LSSVMRegressor(PolynomialKernel(degree=3), C=1.0, solver="exact"),
    LSSVMClassifier(PolynomialKernel(degree=3), C=1.0, batch_size=16, n_iter=10, random_state=0),
    SLKLRegressor(PolynomialKernel(degree=3), n_components=20, max_iter=200, random_state=0),
    SLKLClassifier(PolynomialKernel(degree=3), n_components=20, max_iter=200, random_state=0),
    DoublyStochasticRegressor(PolynomialKernel(degree=3), n_iter=5, block_size=16, step_size=0.01, random_state=0),
    DoublyStochasticClassifier(PolynomialKernel(degree=3), loss="logistic", n_iter=5, block_size=16, step_size=0.01,
                               random_state=0),
    StagewiseRegressor(PolynomialKernel(degree=3), block_size=12, n_stages=2, pca_components=None, random_state=0),
    StagewiseClassifier(PolynomialKernel(degree=3), block_size=12, n_stages=2, pca_components=None, random_state=0),
    GeneralizedLeastSquaresClassifier(max_iter=20, alpha=1e-6),  # small weights would not overflow
    CalibratedLeastSquaresClassifier(max_iter=10),
    PolynomialRandomFeatures(PolynomialKernel(degree=3), n_components=32, random_state=0),
    NystromFeatures(PolynomialKernel(degree=3), n_components=20, random_state=0),
], ids=_id)
def test_overflowing_predictions_are_refused_naming_X(estimator):
    X, y = _data(estimator)
    est = _fit(clone(estimator), X, y)
    # a linear model overflows only near the largest float: entries up to 5e307
    factor = 5e307 / np.abs(X).max() if isinstance(est, GeneralizedLeastSquaresClassifier) else 1e120
    for method in METHODS:
        if hasattr(est, method):
            assert np.all(np.isfinite(getattr(est, method)(X)))
            with pytest.raises(ValueError, match=r"for X contain NaN or infinity .* rescale X"), \
                    np.errstate(over="ignore", invalid="ignore"):
                getattr(est, method)(X * factor)


# --------------------------------------------------------------------------------------------
# item 8: many classes are estimated before the class-sized arrays exist


@pytest.mark.parametrize("estimator", [
    LSSVMClassifier(C=1.0, batch_size=16, n_iter=1, random_state=0),
    LSSVMClassifier(C=1.0, solver="exact"),
    SLKLClassifier(n_components=20, max_iter=1, random_state=0),
    RegularizedKernelClassifier(max_iter=1, random_state=0),
    RegularizedKernelClassifier(kernel="linear", max_iter=1, random_state=0),
    RegularizedKernelClassifier(solver="fixed_point", max_iter=1, random_state=0),
    DoublyStochasticClassifier(n_iter=1, block_size=16, random_state=0),
    DoublyStochasticClassifier(loss="logistic", n_iter=1, block_size=16, random_state=0),
    StagewiseClassifier(block_size=8, n_stages=1, pca_components=None, random_state=0),
    GeneralizedLeastSquaresClassifier(max_iter=1),
    CalibratedLeastSquaresClassifier(max_iter=1),
], ids=_id)
def test_many_classes_are_refused_before_allocating_per_class_arrays(estimator):
    n, k = 1000, 500  # a float64 one-column-per-class coding alone is 4 MB
    X = np.random.default_rng(3).normal(size=(n, 3))
    y = np.arange(n) % k
    est = clone(estimator).set_params(max_memory="1MB")
    with pytest.raises(ValueError):
        _fit(clone(est), X, y)  # imports and one-time set-up outside the trace
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as refusal:
            _fit(est, X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * X.nbytes, f"allocated {peak} bytes before refusing (X is {X.nbytes})"
    assert re.search(f"max_memory=.* too small for {k} classes", str(refusal.value)), str(refusal.value)
    _fit(est, X[:40], y[:40] % 3)  # three classes fit in the same budget


# --------------------------------------------------------------------------------------------
# the helpers


def test_feature_names_change_only_with_a_completed_fit():
    pd = pytest.importorskip("pandas")
    X, y = _data(ExactKernelRidge())
    est = ExactKernelRidge(alpha=1.0).fit(pd.DataFrame(X, columns=list("abcd")), y)
    bad = pd.DataFrame(X, columns=list("wxyz"))
    bad.iloc[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad, y)
    assert list(est.feature_names_in_) == list("abcd") and est.n_features_in_ == 4
    est.fit(X[:, :3], y)  # a completed fit without names removes them
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ == 3
