"""Tests of paper 5's Algorithms 1 and 2 (kernelscale.least_squares: estimators, generalized, calibrated,
ridge) against independent references:
scikit-learn's Ridge / LogisticRegression, np.linalg.lstsq, and a naive re-implementation of
Algorithm 2 written here with lstsq."""

import warnings

import numpy as np
import pytest
from scipy import linalg
from memcheck import peak_bytes
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import log_loss
from sklearn.utils.class_weight import compute_sample_weight
from threadpoolctl import threadpool_limits

import kernelscale.least_squares.calibrated as calibrated
import kernelscale.least_squares.generalized as generalized
import kernelscale.least_squares.ridge as ridge
from kernelscale.least_squares.calibrated import CLS_GCV_SCALE, calibrated_least_squares
from kernelscale.least_squares.estimators import CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier
from kernelscale.least_squares.generalized import generalized_least_squares
from kernelscale.ops.rows import executor
from kernelscale.persistence import load, save
from kernelscale.simplex import project_hypercube, project_simplex


@pytest.fixture(autouse=True)
def one_blas_thread():
    # small GEMMs: threads only add contention when other test processes share the cores
    with threadpool_limits(1):
        yield


def make_data(n=150, d=5, k=3, seed=0, shift=2.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 0] += shift  # a non-zero mean, so the intercept handling matters
    W = rng.normal(size=(d, k))
    logits = (X - X.mean(axis=0)) @ W
    y = np.array([rng.choice(k, p=np.exp(s) / np.exp(s).sum()) for s in logits])
    return X, y


def one_hot(y, k=None):
    k = k or y.max() + 1
    return np.eye(k)[y]


def quiet(est, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(*args, **kwargs)


# ----------------------------------------------------------------------------------------------
# Algorithm 1


@pytest.mark.parametrize("weighted", [False, True])
def test_identity_link_is_ridge_regression_in_one_iteration(weighted):
    X, y = make_data()
    sw = np.random.default_rng(1).uniform(0.2, 3.0, size=len(y)) if weighted else None
    alpha = 0.05
    est = GeneralizedLeastSquaresClassifier(link="identity", alpha=alpha).fit(X, y, sample_weight=sw)
    # ours: sum_i w_i |.|^2 / sum w + alpha |W|^2 ; sklearn: sum_i w_i |.|^2 + alpha_s |W|^2
    total = len(y) if sw is None else sw.sum()
    ref = Ridge(alpha=alpha * total).fit(X, one_hot(y), sample_weight=sw)
    assert est.n_iter_ == 1
    assert len(est.objective_history_) == 2
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-10)


def test_identity_link_without_ridge_is_ordinary_least_squares():
    X, y = make_data(seed=3)
    est = GeneralizedLeastSquaresClassifier(link="identity", alpha=0.0, max_iter=1).fit(X, y)
    Xa = np.hstack([X, np.ones((len(X), 1))])
    sol = np.linalg.lstsq(Xa, one_hot(y), rcond=None)[0]
    np.testing.assert_allclose(est.coef_, sol[:-1].T, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, sol[-1], atol=1e-10)


@pytest.mark.parametrize("solver", ["accelerated", "gls"])
@pytest.mark.parametrize("L", [1.0, 0.5])
def test_softmax_calibrated_loss_decreases_at_every_iteration(L, solver):
    X, y = make_data(n=120, seed=4)
    alpha = 1e-4
    kw = dict(L=L, alpha=alpha, tol=0.0, solver=solver)
    history = quiet(GeneralizedLeastSquaresClassifier(max_iter=30, **kw), X, y).objective_history_
    assert len(history) == 31
    assert np.all(np.diff(history) < 0)
    assert history[0] == pytest.approx(np.log(3))  # W = 0: uniform probabilities
    # independent check that the history is the calibrated (multinomial logistic) loss
    for t in (1, 2, 5):
        est = quiet(GeneralizedLeastSquaresClassifier(max_iter=t, **kw), X, y)
        loss = log_loss(y, est.predict_proba(X)) + 0.5 * alpha * np.sum(est.coef_**2)
        assert loss == pytest.approx(history[t], rel=1e-10)


def noisy_separated_data(n=400, d=8, k=3, seed=0):
    """Well separated classes with 5% of the labels redrawn and one badly scaled feature: the
    logistic minimiser is finite, but most predictions are confident, so the softmax curvature
    is far below the bound L Sigma and plain Algorithm 1 crawls."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(k, d))
    y = rng.integers(0, k, n)
    X = centres[y] + rng.normal(size=(n, d))
    X[:, 0] = 50.0 * X[:, 0] + 7.0
    flip = rng.random(n) < 0.05
    y[flip] = rng.integers(0, k, flip.sum())
    return X, y


def reference_objective(X, y, alpha):
    """min_W,b mean_i (lse(s_i) - s_{i,y_i}) + alpha/2 |W|^2 by scipy's L-BFGS-B."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    n, d = X.shape
    k = y.max() + 1
    Y = one_hot(y, k)

    def fun(v):
        W, b = v[: d * k].reshape(d, k), v[d * k :]
        S = X @ W + b
        P = np.exp(S - logsumexp(S, axis=1, keepdims=True))
        R = (P - Y) / n
        f = np.mean(logsumexp(S, axis=1) - np.sum(Y * S, axis=1)) + 0.5 * alpha * np.sum(W * W)
        return f, np.concatenate([(X.T @ R + alpha * W).ravel(), R.sum(axis=0)])

    res = minimize(fun, np.zeros(d * k + k), jac=True, method="L-BFGS-B",
                   options=dict(maxiter=20000, gtol=1e-12, ftol=1e-15))
    return res.fun


def test_default_softmax_fit_converges_where_plain_algorithm_1_stops_short():
    X, y = noisy_separated_data()
    alpha = 1e-6 * X.var(axis=0).mean()  # a small ridge (the former "auto"): a flat, slow objective
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # the default solver must converge
        tight = GeneralizedLeastSquaresClassifier(alpha=alpha, tol=1e-6).fit(X, y)
        default = GeneralizedLeastSquaresClassifier(alpha=alpha).fit(X, y)
    f_star = reference_objective(X, y, tight.alpha_)

    def gap(est):
        return (est.objective_history_[-1] - f_star) / f_star

    assert 0 <= gap(tight) < 1e-3
    assert tight.n_iter_ < 150
    assert 0 <= gap(default) < 1e-2 and default.n_iter_ < tight.n_iter_ / 2
    # Algorithm 1 as printed, for 100 iterations at the default tolerance, stops 7e-3 above
    old = GeneralizedLeastSquaresClassifier(solver="gls", max_iter=100, alpha=alpha).fit(X, y)
    assert gap(old) > 1.5 * gap(default)
    # and plain steps need several times more iterations for the tight tolerance
    plain = quiet(GeneralizedLeastSquaresClassifier(solver="gls", alpha=alpha, tol=1e-6), X, y)
    assert plain.n_iter_ > 3 * tight.n_iter_


@pytest.mark.parametrize("solver", ["accelerated", "gls"])
def test_softmax_link_converges_to_multinomial_logistic_regression(solver):
    X, y = make_data(n=200, seed=5)
    alpha = 1e-2
    est = GeneralizedLeastSquaresClassifier(alpha=alpha, max_iter=2000, tol=1e-14, solver=solver).fit(X, y)
    ref = LogisticRegression(C=1.0 / (alpha * len(y)), tol=1e-12, max_iter=10000).fit(X, y)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-5)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-4)


def test_accelerated_restarts_keep_the_loss_monotone_down_to_rounding():
    X, y = noisy_separated_data(seed=1)
    result = generalized_least_squares(X, one_hot(y), alpha=1e-6, max_iter=1000, tol=0.0)
    assert result.n_restarts > 0  # the restart branch ran
    assert np.all(np.diff(result.objective_history) <= 0)
    # with tol=0 it runs until a plain step cannot lower f any more: the L-BFGS-B optimum
    f_star = reference_objective(X, y, 1e-6)
    assert result.converged and result.n_iter < 1000
    assert result.objective_history[-1] == pytest.approx(f_star, rel=1e-9)


def test_generalized_least_squares_function_with_offset_equals_shifted_intercept():
    X, y = make_data(n=100, seed=6)
    Y = one_hot(y)
    shift = np.array([0.3, -0.2, 0.5])
    plain = generalized_least_squares(X, Y, alpha=1e-3, max_iter=20, tol=0.0)
    offset = generalized_least_squares(X, Y, alpha=1e-3, max_iter=20, tol=0.0, offset=np.tile(shift, (100, 1)),
                                       intercept_init=-shift)
    np.testing.assert_allclose(offset.coef, plain.coef, atol=1e-10)
    np.testing.assert_allclose(offset.intercept + shift, plain.intercept, atol=1e-10)


def test_sample_weight_acts_as_repetition():
    X, y = make_data(n=80, seed=7)
    reps = np.random.default_rng(0).integers(0, 4, size=len(y))
    kw = dict(alpha=1e-3, max_iter=15, tol=0.0)
    a = quiet(GeneralizedLeastSquaresClassifier(**kw), X, y, sample_weight=reps)
    b = quiet(GeneralizedLeastSquaresClassifier(**kw), np.repeat(X, reps, axis=0), np.repeat(y, reps))
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)
    np.testing.assert_allclose(a.objective_history_, b.objective_history_, rtol=1e-10)


def test_class_weight_balanced_is_the_balanced_sample_weight():
    X, y = make_data(n=90, seed=8)
    y[:60] = 0  # imbalanced
    kw = dict(alpha=1e-3, max_iter=10, tol=0.0)
    a = quiet(GeneralizedLeastSquaresClassifier(class_weight="balanced", **kw), X, y)
    b = quiet(GeneralizedLeastSquaresClassifier(**kw), X, y, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-12)


def test_warm_start_continues_the_iterations():
    X, y = make_data(seed=9)
    kw = dict(alpha=1e-3, tol=0.0)
    # plain steps carry no state besides W, b: 3 + 3 warm-started steps are 6 steps
    est = quiet(GeneralizedLeastSquaresClassifier(max_iter=3, warm_start=True, solver="gls", **kw), X, y)
    quiet(est, X, y)
    full = quiet(GeneralizedLeastSquaresClassifier(max_iter=6, solver="gls", **kw), X, y)
    np.testing.assert_allclose(est.coef_, full.coef_, atol=1e-12)
    np.testing.assert_allclose(est.objective_history_, full.objective_history_[3:], rtol=1e-12)
    with pytest.raises(ValueError, match="warm_start"):
        est.fit(X[:, :4], y)
    # accelerated: the momentum restarts, the loss continues from where it stopped
    acc = quiet(GeneralizedLeastSquaresClassifier(max_iter=3, warm_start=True, **kw), X, y)
    first = acc.objective_history_[-1]
    quiet(acc, X, y)
    assert acc.objective_history_[0] == pytest.approx(first, rel=1e-12)
    assert acc.objective_history_[-1] < first


def test_zero_variance_feature_is_handled_by_the_ridge():
    X, y = make_data(seed=10)
    X_const = np.hstack([X, np.full((len(X), 1), 7.0)])
    kw = dict(alpha=1e-6, max_iter=10, tol=0.0)
    a = quiet(GeneralizedLeastSquaresClassifier(**kw), X_const, y)
    b = quiet(GeneralizedLeastSquaresClassifier(**kw), X, y)
    np.testing.assert_allclose(a.coef_[:, -1], 0.0, atol=1e-8)  # rounding / alpha only
    np.testing.assert_allclose(a.predict_proba(X_const), b.predict_proba(X), atol=1e-8)
    with pytest.raises(ValueError, match="alpha > 0"):
        GeneralizedLeastSquaresClassifier(alpha=0.0).fit(X_const, y)
    with pytest.raises(ValueError, match="alpha > 0"):
        CalibratedLeastSquaresClassifier(alpha=0.0).fit(X_const, y)
    # the default "auto" ridge as well, with a duplicated column on top (Sigma singular twice)
    X_dup = np.hstack([X_const, X[:, :1]])
    g = quiet(GeneralizedLeastSquaresClassifier(max_iter=10, tol=0.0), X_dup, y)
    np.testing.assert_allclose(g.coef_[:, -2], 0.0, atol=1e-8)
    np.testing.assert_allclose(g.coef_[:, 0], g.coef_[:, -1], rtol=1e-6)  # the ridge splits a duplicate evenly
    c = CalibratedLeastSquaresClassifier(max_iter=3).fit(X_const, y)
    np.testing.assert_allclose(c.coef_[:, :, -1], 0.0, atol=1e-8)


def gcv_by_definition(X, Y, sw, a):
    """GCV error of the weighted ridge fit of Y on X with an intercept, from the hat matrix H
    (Yhat = H Y): RSS / (1 - trace(H) / sum(sw))^2, weights normalised to sum to 1."""
    w = sw / sw.sum()
    Xc = X - w @ X
    A = np.linalg.solve(Xc.T @ (w[:, None] * Xc) + a * np.eye(X.shape[1]), Xc.T @ (w[:, None] * Y))
    H = Xc @ np.linalg.solve(Xc.T @ (w[:, None] * Xc) + a * np.eye(X.shape[1]), Xc.T * w) + w[None, :]
    R = Y - w @ Y - Xc @ A
    assert np.allclose(H @ Y, Y - R)
    return float(w @ (R * R).sum(axis=1)) / (1 - np.trace(H) / sw.sum()) ** 2


def test_auto_ridge_minimises_gcv_over_a_grid_relative_to_the_mean_feature_variance(monkeypatch):
    X, y = make_data(seed=11)
    X = X[:60]  # few samples: the choice is not at an end of the grid
    y = y[:60]
    sw = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    kw = dict(max_iter=20, tol=0.0)
    auto = quiet(GeneralizedLeastSquaresClassifier(**kw), X, y, sample_weight=sw)
    w = sw / sw.sum()
    mean = w @ X
    variance = w @ (X - mean) ** 2
    Y = np.eye(3)[np.searchsorted(np.unique(y), y)]
    grid = ridge.GCV_GRID * variance.mean()
    scores = [gcv_by_definition(X, Y, sw, a) for a in grid]
    assert auto.alpha_ == pytest.approx(grid[int(np.argmin(scores))], rel=1e-12)
    assert 0 < np.argmin(scores) < len(grid) - 1
    # calibrated least squares: CLS_GCV_SCALE (its default max_iter) times the GCV ridge, whatever max_iter
    cls = quiet(CalibratedLeastSquaresClassifier(max_iter=3), X, y, sample_weight=sw)
    assert CLS_GCV_SCALE == CalibratedLeastSquaresClassifier().max_iter
    assert cls.alpha_ == pytest.approx(CLS_GCV_SCALE * auto.alpha_, rel=1e-12)
    # above GCV_MAX_FEATURES features: 1e-6 times the mean variance
    monkeypatch.setattr(ridge, "GCV_MAX_FEATURES", X.shape[1] - 1)
    big = quiet(GeneralizedLeastSquaresClassifier(**kw), X, y, sample_weight=sw)
    assert big.alpha_ == pytest.approx(1e-6 * variance.mean(), rel=1e-12)
    explicit = quiet(GeneralizedLeastSquaresClassifier(alpha=auto.alpha_, **kw), X, y, sample_weight=sw)
    np.testing.assert_allclose(auto.coef_, explicit.coef_, rtol=1e-12)
    # all features constant: Cov = 0, the ridge falls back to 1e-6 itself
    monkeypatch.undo()
    const = quiet(GeneralizedLeastSquaresClassifier(**kw), np.ones((len(y), 3)), y)
    assert const.alpha_ == 1e-6
    # the weighted mean of a column of ones is 1 up to the rounding of a sum of n terms (n eps with
    # a sequential BLAS kernel), so the centred features, and each step's gradient, are that small;
    # the step divides them by the ridge: after max_iter steps |W| <= max_iter n eps / alpha
    bound = kw["max_iter"] * len(y) * np.finfo(np.float64).eps / const.alpha_
    np.testing.assert_allclose(const.coef_, 0.0, atol=bound)


@pytest.mark.parametrize("n", [40, 90])  # fewer rows than features (the n x n dual), and more
def test_auto_ridge_solvers_equal_the_cholesky_solve_of_sigma(n, monkeypatch):
    """alpha="auto" factorises Sigma by the eigendecomposition GCV computed: of the d x d covariance
    (n >= d) or of the n x n dual matrix (n < d; here also below DUAL_MIN_RIDGE). Both solves, and
    the GCV ridge, equal the definitions: np.linalg.solve of scale Cov + alpha I,
    gcv_by_definition over the grid."""
    rng = np.random.default_rng(3)
    X, y = make_data(n=n, d=60, seed=13)
    X[:, 1] = X[:, 2]  # collinear columns: Cov (and for n < d, Cov anyway) is singular
    sw = rng.uniform(0.5, 2.0, size=n)
    w = sw / sw.sum()
    Y = one_hot(y)
    Xc = X - w @ X
    cov = Xc.T @ (w[:, None] * Xc)
    args = (executor(2**30, X), X, w, 0.5, "auto", Y, sw)
    _, default_solve, alpha = ridge.factor_sigma(*args)
    # an interpolating ridge is solved on the d x d side, where rounding is not amplified by 1/alpha
    dual = n < X.shape[1] and alpha >= ridge.DUAL_MIN_RIDGE * np.trace(cov) / X.shape[1]
    assert isinstance(default_solve, ridge._DualSolve if dual else ridge._EigenSolve)
    monkeypatch.setattr(ridge, "DUAL_MIN_RIDGE", 0.0)
    mean, solve, alpha = ridge.factor_sigma(*args)
    assert isinstance(solve, ridge._DualSolve if n < X.shape[1] else ridge._EigenSolve)
    grid = ridge.GCV_GRID * np.trace(cov) / X.shape[1]
    assert alpha == pytest.approx(grid[int(np.argmin([gcv_by_definition(X, Y, sw, a) for a in grid]))], rel=1e-12)
    G = rng.normal(size=(X.shape[1], 3))
    G[:, 0] = Xc.T @ rng.normal(size=n)  # a gradient-like column in the row space
    expected = np.linalg.solve(0.5 * cov + alpha * np.eye(X.shape[1]), G)
    np.testing.assert_allclose(solve(G), expected, rtol=0, atol=1e-8 * np.abs(expected).max())


@pytest.mark.parametrize("cls", [GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier])
@pytest.mark.parametrize("n", [40, 120])
def test_auto_ridge_fit_equals_the_cholesky_fit_with_that_ridge(cls, n, monkeypatch):
    # the "auto" solves (n x n dual for n < d, d x d eigendecomposition otherwise) against the
    # Cholesky factor of Sigma with the same ridge (what a float alpha uses), iteration for iteration
    X, y = make_data(n=n, d=80, seed=14)
    sw = np.random.default_rng(1).uniform(0.5, 2.0, size=n)
    kw = dict(max_iter=30, tol=0.0)
    auto = quiet(cls(**kw), X, y, sample_weight=sw)
    factor_sigma = ridge.factor_sigma

    def cholesky_sigma(op, X, w, scale, alpha, *args, **kwargs):
        mean, solve, alpha = factor_sigma(op, X, w, scale, alpha, *args, **kwargs)
        _, cholesky, same = factor_sigma(op, X, w, scale, alpha)
        assert isinstance(cholesky, ridge._CholeskySolve) and same == alpha
        return mean, cholesky, alpha

    # the solvers call factor_sigma by the name they imported
    monkeypatch.setattr(generalized, "factor_sigma", cholesky_sigma)
    monkeypatch.setattr(calibrated, "factor_sigma", cholesky_sigma)
    reference = quiet(cls(**kw), X, y, sample_weight=sw)
    assert auto.alpha_ == reference.alpha_ and auto.n_iter_ == reference.n_iter_
    np.testing.assert_allclose(auto.coef_, reference.coef_, rtol=0, atol=1e-8 * np.abs(reference.coef_).max())
    np.testing.assert_allclose(auto.predict_proba(X), reference.predict_proba(X), atol=1e-8)


@pytest.mark.parametrize("cls", [GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier])
def test_auto_ridge_makes_the_fit_independent_of_the_feature_scale(cls):
    X, y = make_data(seed=12, d=8)
    kw = dict(max_iter=15, tol=0.0)
    a = quiet(cls(**kw), X, y)
    scale = 1e-3  # e.g. random Fourier features of scale sqrt(2 / D)
    b = quiet(cls(**kw), X * scale, y)
    assert b.alpha_ == pytest.approx(a.alpha_ * scale**2, rel=1e-12)
    np.testing.assert_allclose(b.coef_ * scale, a.coef_, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(b.predict_proba(X * scale), a.predict_proba(X), atol=1e-9)
    # an absolute ridge is not scale-free: the same float shrinks the small-scale fit far more
    c = quiet(cls(alpha=a.alpha_, **kw), X * scale, y)
    assert np.abs(c.predict_proba(X * scale) - a.predict_proba(X)).max() > 1e-3


@pytest.mark.parametrize("cls", [GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier])
def test_single_class_raises(cls):
    X, _ = make_data(n=20)
    with pytest.raises(ValueError, match="one class"):
        cls().fit(X, np.zeros(20, dtype=int))


@pytest.mark.parametrize(
    "est",
    [
        GeneralizedLeastSquaresClassifier(max_iter=10),
        GeneralizedLeastSquaresClassifier(link="identity"),
        CalibratedLeastSquaresClassifier(max_iter=5),
    ],
    ids=["softmax", "identity", "calibrated"],
)
def test_float32_end_to_end_and_proba_consistent_with_predict(est):
    X, y = make_data(seed=11)
    labels = np.array(["a", "b", "c"])[y]
    e32 = quiet(clone(est), X.astype(np.float32), labels)
    e64 = quiet(clone(est), X, labels)
    assert e32.coef_.dtype == np.float32 and e32.intercept_.dtype == np.float32
    P32 = e32.predict_proba(X.astype(np.float32))
    assert P32.dtype == np.float32
    np.testing.assert_allclose(P32, e64.predict_proba(X), atol=2e-3)
    P = e64.predict_proba(X)
    assert np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(e64.predict(X), e64.classes_[np.argmax(P, axis=1)])


def test_callback_receives_iterations_and_stops():
    X, y = make_data(seed=12)
    seen = []
    est = GeneralizedLeastSquaresClassifier(tol=0.0, callback=lambda info: seen.append(info) or len(seen) == 4)
    est.fit(X, y)  # stopped by the callback: no ConvergenceWarning
    assert [i["iteration"] for i in seen] == [1, 2, 3, 4]
    assert est.n_iter_ == 4
    np.testing.assert_allclose([i["objective"] for i in seen], est.objective_history_[1:])
    est = CalibratedLeastSquaresClassifier(tol=0.0, callback=lambda info: info["iteration"] == 2, verbose=1)
    assert est.fit(X, y).n_iter_ == 2


@pytest.mark.parametrize("cls", [GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier])
def test_memory_budget_is_checked_before_allocating(cls):
    X, y = make_data(n=2000, d=50)

    def fit():
        try:
            cls(max_memory=20_000).fit(X, y)
        except ValueError as err:
            return str(err)

    peak, message = peak_bytes(fit)
    # refused by the estimate of the class-sized arrays (before the one-hot targets) or of the rest
    assert "max_memory" in message and ("needs at least" in message or "too small for 3 classes" in message)
    assert peak < 200_000  # far below Sigma (50 x 50) plus the n x k arrays it would need


# ----------------------------------------------------------------------------------------------
# Algorithm 2


def naive_calibrated(X, Y, basis_powers, n_iter, project):
    """Eqs. 18-19 literally, with lstsq: fit the residual on [x, 1]; refit y on [G(y~), 1]."""
    n = X.shape[0]
    Xa = np.hstack([X, np.ones((n, 1))])
    Yhat = np.zeros_like(Y)
    out = []
    for _ in range(n_iter):
        Yt = Yhat + Xa @ np.linalg.lstsq(Xa, Y - Yhat, rcond=None)[0]
        G = np.hstack([Yt**p for p in basis_powers] + [np.ones((n, 1))])
        Yhat = project(G @ np.linalg.lstsq(G, Y, rcond=None)[0])
        out.append(Yhat)
    return out


def test_calibrated_matches_naive_algorithm_2():
    X, y = make_data(n=150, seed=13)
    Y = one_hot(y)
    naive = naive_calibrated(X, Y, (1, 2), 4, project_simplex)
    for t in (1, 4):
        est = CalibratedLeastSquaresClassifier(basis=("y", "y2"), alpha=1e-12, max_iter=t, tol=0.0).fit(X, y)
        np.testing.assert_allclose(est.predict_proba(X), naive[t - 1], atol=1e-7)


def test_calibrated_squared_error_never_increases():
    X, y = make_data(n=200, seed=14)
    est = CalibratedLeastSquaresClassifier(max_iter=25, tol=0.0).fit(X, y)
    h = est.objective_history_
    assert len(h) == 26 and h[0] == pytest.approx(1.0)
    assert np.all(np.diff(h) <= 1e-12)
    assert h[-1] < h[1] < h[0]
    P = est.predict_proba(X)
    assert h[-1] == pytest.approx(np.mean(np.sum((one_hot(y) - P) ** 2, axis=1)), rel=1e-10)


def test_multilabel_uses_the_hypercube():
    rng = np.random.default_rng(15)
    X = rng.normal(size=(200, 4))
    Y = (X @ rng.normal(size=(4, 3)) + 0.3 * rng.normal(size=(200, 3)) > 0).astype(int)
    est = CalibratedLeastSquaresClassifier(basis=("y", "y2"), alpha=1e-12, max_iter=6, tol=0.0).fit(X, Y)
    assert est.multilabel_ and list(est.classes_) == [0, 1, 2]
    P = est.predict_proba(X)
    assert P.shape == (200, 3) and P.min() >= 0 and P.max() <= 1
    assert np.all(np.diff(est.objective_history_) <= 1e-12)
    np.testing.assert_array_equal(est.predict(X), (P > 0.5).astype(int))
    np.testing.assert_allclose(P, naive_calibrated(X, Y.astype(float), (1, 2), 6, project_hypercube)[-1], atol=1e-7)
    assert np.mean(est.predict(X) == Y) > 0.85
    with pytest.raises(ValueError, match="class_weight"):
        CalibratedLeastSquaresClassifier(class_weight="balanced").fit(X, Y)
    with pytest.raises(ValueError, match="multi-label"):
        CalibratedLeastSquaresClassifier().fit(X, np.tile(np.arange(3), (200, 1)))


@pytest.mark.parametrize("basis", [("y", "y5"), ("exp",), (), "y", ("y", "y")])
def test_bad_basis_raises(basis):
    X, y = make_data(n=30)
    with pytest.raises(ValueError, match="basis"):
        CalibratedLeastSquaresClassifier(basis=basis).fit(X, y)


def test_calibrated_warm_start_adds_iterations():
    X, y = make_data(seed=16)
    est = CalibratedLeastSquaresClassifier(max_iter=2, tol=0.0, warm_start=True).fit(X, y)
    est.set_params(max_iter=5).fit(X, y)
    full = CalibratedLeastSquaresClassifier(max_iter=5, tol=0.0).fit(X, y)
    assert est.n_iter_ == 5
    np.testing.assert_allclose(est.predict_proba(X), full.predict_proba(X), atol=1e-12)
    np.testing.assert_allclose(est.objective_history_, full.objective_history_, rtol=1e-10)
    with pytest.raises(ValueError, match="max_iter"):
        est.set_params(max_iter=3).fit(X, y)


def test_calibrated_function_sample_weight_as_repetition():
    X, y = make_data(n=60, seed=17)
    reps = np.random.default_rng(1).integers(0, 3, size=60)
    a = calibrated_least_squares(X, one_hot(y), sample_weight=reps, max_iter=3, tol=0.0)
    b = calibrated_least_squares(np.repeat(X, reps, axis=0), one_hot(np.repeat(y, reps), 3), max_iter=3, tol=0.0)
    np.testing.assert_allclose(a.objective_history, b.objective_history, rtol=1e-9)
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-8)


# ----------------------------------------------------------------------------------------------
# persistence of multi-label models (the shared tests cover the rest: estimator_list.py)

def test_multilabel_model_round_trips(tmp_path):
    rng = np.random.default_rng(19)
    X = rng.normal(size=(50, 3))
    Y = (rng.normal(size=(50, 2)) > 0).astype(int)
    fitted = CalibratedLeastSquaresClassifier(max_iter=3).fit(X, Y)
    save(fitted, tmp_path / "m.ks")
    loaded = load(tmp_path / "m.ks")
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))
    assert loaded.multilabel_ and loaded.basis_ == fitted.basis_


@pytest.mark.parametrize("link, L", [("identity", 0.9), ("softmax", 0.4)])
def test_step_constant_below_the_lipschitz_constant_raises(link, L):
    X, y = make_data(n=30)
    with pytest.raises(ValueError, match="L="):
        GeneralizedLeastSquaresClassifier(link=link, L=L).fit(X, y)


def test_calibrated_stops_at_max_iter_or_tol_without_a_warning():
    """max_iter counts stages, as a boosting model's size, not a convergence budget: reaching it
    does not warn; the relative-decrease rule of tol may stop sooner."""
    X, y = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        capped = CalibratedLeastSquaresClassifier(max_iter=3, tol=1e-12).fit(X[:300] / 16, y[:300])
        early = CalibratedLeastSquaresClassifier(max_iter=200, tol=1e-3).fit(X[:300] / 16, y[:300])
    assert capped.n_iter_ == 3 and early.n_iter_ < 200
    h = early.objective_history_
    assert h[-2] - h[-1] <= 1e-3 * h[-2] or h[-1] <= 1e-12 * h[0]


def test_moments_merged_over_chunks_equal_the_centred_moments_of_all_rows():
    """The calibration's and the stagewise stages' moments, gathered chunk by chunk about shifts
    of their own, merged and centred, against their definition on all rows at once: columns of
    mean 1e6 (raw second moments would lose every digit of the variance), an empty chunk first."""
    from kernelscale.least_squares.ridge import centred_moments, merge_moments, shifted_moments

    rng = np.random.default_rng(0)
    C = 1e6 + rng.normal(size=(3000, 4)) * [1.0, 2.0, 0.5, 3.0]
    R = rng.normal(size=(3000, 2))
    w = rng.uniform(size=3000)
    w /= w.sum()
    bounds = [(0, 0), (0, 1000), (1000, 2500), (2500, 3000)]
    mean, gram, cross, r_sum = centred_moments(merge_moments(*(shifted_moments(C[a:b], R[a:b], w[a:b])
                                                               for a, b in bounds)))
    m = w @ C
    Cc = C - m
    np.testing.assert_allclose(mean, m, rtol=1e-14)
    # columns near 1e6 carry about 1e-10 of rounding into any centred value, the reference's too
    np.testing.assert_allclose(gram, (Cc * w[:, None]).T @ Cc, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(cross, (Cc * w[:, None]).T @ R, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r_sum, w @ R, rtol=1e-12)


def test_calibration_ridge_fit_of_float32_predictions_matches_float64():
    # the basis y, y^2, y^3 of confident predictions is nearly collinear: a Gram matrix summed in
    # float32 was off by 8% in the calibration weights here
    from kernelscale.least_squares.calibrated import _calibration_moments
    from kernelscale.least_squares.ridge import ridge_fit

    rng = np.random.default_rng(0)
    n, k = 20000, 10
    Yt = (np.eye(k)[rng.integers(0, k, n)] + 0.01 * rng.normal(size=(n, k))).astype(np.float32)
    Y = rng.normal(size=(n, k)).astype(np.float32)
    w = np.full(n, 1.0 / n)
    basis = ("y", "y2", "y3")
    A32, c32 = ridge_fit(_calibration_moments(Yt, Y, w, basis), "auto")
    A64, c64 = ridge_fit(_calibration_moments(Yt.astype(np.float64), Y.astype(np.float64), w, basis), "auto")
    assert np.abs(A32 - A64).max() < 1e-3 * np.abs(A64).max()
    np.testing.assert_allclose(c32, c64, atol=1e-3 * np.abs(c64).max())


def test_a_covariance_spanning_the_float_range_is_decomposed_not_hung():
    """Columns of order 1e150 beside ones of 1e-9 give a covariance with entries from 1e-17 to 1e300,
    on which LAPACK's eigensolver did not return; the power-of-2 scaling decomposes it (found by
    the fuzz campaign: case 06, seed 8585)."""
    from kernelscale.linalg import symmetric_eigh

    M = np.array([[6.97e-17, -1.51e141, 1.62e-17], [-1.51e141, 9.10e299, -8.64e140], [1.62e-17, -8.64e140, 5.06e-17]])
    for spare in (0, 2**20):  # the default driver, and divide and conquer (its 2 d^2 floats lent)
        values, vectors = symmetric_eigh(M, spare)
        np.testing.assert_allclose(vectors @ np.diag(values) @ vectors.T, M, rtol=0, atol=1e-15 * 9.10e299)
        np.testing.assert_allclose(vectors.T @ vectors, np.eye(3), atol=1e-15)
        for scale in (1e-150, 1e-200):  # the same range of entries, the largest not of order 1: hung too
            values, vectors = symmetric_eigh(scale * M, spare)
            np.testing.assert_allclose(vectors @ np.diag(values) @ vectors.T, scale * M, rtol=0, atol=1e-15 * scale * 9.1e299)
    ordinary = np.cov(np.random.default_rng(0).normal(size=(500, 600)))
    for spare in (0, 2 * 8 * 500**2):
        values, vectors = symmetric_eigh(ordinary, spare)
        np.testing.assert_allclose(values, linalg.eigh(ordinary)[0], rtol=0, atol=1e-13 * values.max())
        np.testing.assert_allclose(vectors * values @ vectors.T, ordinary, rtol=0, atol=1e-13 * values.max())
    with pytest.raises(ValueError, match="rescale X"):
        symmetric_eigh(np.array([[np.inf, 0.0], [0.0, 1.0]]))


def test_divide_and_conquer_only_where_its_workspace_is_lent(monkeypatch):
    from kernelscale import linalg as _spectral

    drivers, eigh = [], linalg.eigh

    def recording(*args, driver=None, **kwargs):
        drivers.append(driver)
        return eigh(*args, driver=driver, **kwargs)

    monkeypatch.setattr(_spectral.linalg, "eigh", recording)
    M = np.cov(np.random.default_rng(1).normal(size=(40, 100)))
    workspace = 2 * 8 * 40**2
    _spectral.symmetric_eigh(M, workspace - 1)
    _spectral.symmetric_eigh(M, workspace)
    assert drivers == [None, "evd"]
