"""Tests of kernelscale.stagewise (paper 5, Algorithm 3): monotone training residual, blocks
regenerated from seeds (checked against kernelscale.features directly), stage fits against
scikit-learn's Ridge / LinearRegression / PCA, conventions, persistence."""


import numpy as np
import pytest
from memcheck import peak_bytes
from scipy.special import expit
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import log_loss
from sklearn.utils.class_weight import compute_sample_weight
from threadpoolctl import threadpool_limits

from kernelscale.kernels import GaussianKernel
from kernelscale.ops.feature_blocks import FeatureBlockSpec, block_rng
from kernelscale.ops.features import FeatureOperator
from kernelscale.stagewise import (
    StagewiseClassifier,
    StagewiseRegressor,
    generator_spec,
    pca_fit,
    pca_transform,
)


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(1):
        yield


def regression_data(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0] * 2) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def classification_data(n=240, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] > 0.3).astype(int) + (X[:, 1] * X[:, 2] > 0)  # 3 classes, not linearly separable
    return X, y


def squared_residual(Y, P):
    return np.mean(np.sum((Y - P) ** 2, axis=1))


# ----------------------------------------------------------------------------------------------
# Algorithm 3: the residual never increases, each stage is a ridge fit on a regenerated block


@pytest.mark.parametrize("generator", ["rff", "sample", "logit", "polynomial"])
@pytest.mark.parametrize("update", ["linear", "calibrated"])
def test_regressor_training_residual_never_increases(generator, update):
    X, y = regression_data()
    est = StagewiseRegressor(generator, block_size=16, n_stages=6, update=update, pca_components=4,
                             random_state=0).fit(X, y)
    h = est.objective_history_
    assert len(h) == 7 and est.n_iter_ == 6
    assert np.all(np.diff(h) <= 1e-12 * h[0])
    assert h[-1] < h[0]
    # independent: the residual of the staged predictions (blocks regenerated at predict time)
    staged = [squared_residual(y[:, None], p[:, None]) for p in est.staged_predict(X)]
    np.testing.assert_allclose(staged, h[1:], rtol=1e-9)


@pytest.mark.parametrize("update", ["linear", "calibrated"])
def test_classifier_training_residual_never_increases(update):
    X, y = classification_data()
    est = StagewiseClassifier(block_size=24, n_stages=5, update=update, pca_components=None, random_state=1).fit(X, y)
    h = est.objective_history_
    assert np.all(np.diff(h) <= 1e-12)
    staged = [squared_residual(np.eye(3)[y], S) for S in est.staged_decision_function(X)]
    np.testing.assert_allclose(staged, h[1:], rtol=1e-9)
    assert est.score(X, y) > 0.7  # the majority class is 46%


def test_softmax_update_never_increases_the_softmax_loss():
    X, y = classification_data()
    est = StagewiseClassifier("logit", block_size=16, n_stages=4, update="softmax", inner_iter=10,
                              pca_components=None, random_state=2).fit(X, y)
    h = est.objective_history_
    assert np.all(np.diff(h) <= 1e-12)
    assert h[0] == pytest.approx(log_loss(y, np.tile(np.bincount(y) / len(y), (len(y), 1))))
    P = est.predict_proba(X)
    assert h[-1] == pytest.approx(log_loss(y, P), rel=1e-9)


def test_each_linear_stage_is_a_ridge_fit_of_the_residual_on_its_regenerated_block():
    X, y = regression_data(n=150, d=3, seed=3)
    alpha = 1e-3
    est = StagewiseRegressor(block_size=20, n_stages=2, pca_components=None, alpha=alpha, random_state=5).fit(X, y)
    spec = FeatureBlockSpec(GaussianKernel(sigma=est.kernel_.sigma), 3, 20, 5, np.float64, "cos")
    prediction = np.full(len(y), y.mean())
    for t in range(2):
        F = spec.block(t).apply(X)  # straight from kernelscale.ops.feature_blocks
        prediction = prediction + Ridge(alpha=alpha * len(y)).fit(F, y - prediction).predict(F)
    np.testing.assert_allclose(est.predict(X), prediction, atol=1e-9)
    assert est.kernel_.sigma == pytest.approx(GaussianKernel().resolve(X).sigma)


def test_a_block_holding_every_feature_gives_least_squares_and_then_nothing_changes():
    X, y = regression_data(n=100, d=4, seed=4)
    est = StagewiseRegressor("sample", block_size=10, n_stages=3, pca_components=None, alpha=0.0, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.predict(X), LinearRegression().fit(X, y).predict(X), atol=1e-10)
    h = est.objective_history_
    np.testing.assert_allclose(h[1:], h[1], rtol=1e-10)


# ----------------------------------------------------------------------------------------------
# the fitted state: seeds, the PCA map and block weights only


def manual_predict(est, X):
    """Rebuild the predictions from the fitted state with kernelscale.ops.feature_blocks only."""
    Z = X if est.pca_components_ is None else (X - est.pca_mean_) @ est.pca_components_
    P = np.tile(est.init_, (len(X), 1))
    d = Z.shape[1]
    for t in range(est.n_iter_):
        if est.generator == "sample":
            idx = np.sort(block_rng(est.seed_, t).choice(d, size=min(est.block_size, d), replace=False))
            F = Z[:, idx]
        elif est.generator == "polynomial":
            spec = FeatureBlockSpec(est.kernel_, d, est.block_size, est.seed_, Z.dtype, "tensorsketch")
            F = spec.block(t).apply(Z)
        else:
            spec = FeatureBlockSpec(est.kernel_, d, est.block_size, est.seed_, Z.dtype, "cos")
            block = spec.block(t)
            if est.generator == "rff":
                F = np.sqrt(2.0 / est.block_size) * np.cos(Z @ block.weights + block.offset)
            else:
                F = expit(Z @ block.weights + block.offset - np.pi)
        step = F @ est.coef_[t] + est.intercept_[t]
        if est.calibration_ is not None:
            step += P @ est.calibration_[t]
        P = P + step
    return P


@pytest.mark.parametrize(
    "generator, update", [("rff", "linear"), ("sample", "calibrated"), ("logit", "linear"), ("polynomial", "calibrated")]
)
def test_fitted_state_is_seed_pca_map_and_block_weights(generator, update):
    X, y = regression_data(n=120, d=8, seed=6)
    p, T, dp = 12, 3, 5
    est = StagewiseRegressor(generator, block_size=p, n_stages=T, update=update, pca_components=dp, random_state=7).fit(X, y)
    fitted = {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
    assert fitted == {
        "seed_", "kernel_", "pca_mean_", "pca_components_", "init_", "coef_", "intercept_",
        "calibration_", "n_iter_", "objective_history_", "update_", "single_output_", "n_features_in_",
    }
    assert est.seed_ == 7
    pe = min(p, dp) if generator == "sample" else p
    assert est.coef_.shape == (T, pe, 1) and est.intercept_.shape == (T, 1)
    assert est.pca_components_.shape == (8, dp) and est.pca_mean_.shape == (8,)
    assert (est.calibration_ is None) == (update == "linear")
    # nothing of size n (no stored features or predictions) and no random weights (dp x p)
    arrays = [v for k, v in vars(est).items() if isinstance(v, np.ndarray) and k != "objective_history_"]
    assert all(a.size < dp * p and 120 not in a.shape for a in arrays)
    np.testing.assert_allclose(est.predict(X), manual_predict(est, X)[:, 0], atol=1e-10)


def test_blocks_are_regenerated_bit_for_bit_and_differ_between_stages():
    Z = np.random.default_rng(8).normal(size=(30, 5))
    gen = FeatureOperator(generator_spec("rff", 5, 8, 11, GaussianKernel(sigma=1.5)), 2**30)
    again = FeatureOperator(generator_spec("rff", 5, 8, 11, GaussianKernel(sigma=1.5)), 2**30)
    np.testing.assert_array_equal(gen.transform(Z, [3]), again.transform(Z, [3]))
    assert not np.allclose(gen.transform(Z, [3]), gen.transform(Z, [4]))
    s = generator_spec("sample", 5, 3, 2)
    np.testing.assert_array_equal(s.block(1).indices, generator_spec("sample", 5, 3, 2).block(1).indices)
    assert len(set(s.block(1).indices)) == 3


def test_pca_matches_scikit_learn():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6)) + 5.0
    mean, components = pca_fit(X, 3)
    ref = PCA(n_components=3).fit(X)
    np.testing.assert_allclose(mean, ref.mean_, atol=1e-12)
    np.testing.assert_allclose(np.abs(components.T @ ref.components_.T), np.eye(3), atol=1e-8)
    np.testing.assert_allclose(np.abs(pca_transform(X, mean, components)), np.abs(ref.transform(X)), atol=1e-8)
    # weights act as repetitions
    reps = rng.integers(0, 3, size=200)
    m_w, c_w = pca_fit(X, 3, sample_weight=reps)
    m_r, c_r = pca_fit(np.repeat(X, reps, axis=0), 3)
    np.testing.assert_allclose(m_w, m_r, atol=1e-10)
    np.testing.assert_allclose(c_w, c_r, atol=1e-8)


# ----------------------------------------------------------------------------------------------
# conventions


def test_float32_end_to_end():
    X, y = classification_data(n=150)
    e32 = StagewiseClassifier(block_size=16, n_stages=2, update="calibrated", pca_components=4, random_state=0)
    e32.fit(X.astype(np.float32), y)
    for name in ("coef_", "intercept_", "calibration_", "init_", "pca_mean_", "pca_components_"):
        assert getattr(e32, name).dtype == np.float32, name
    S32 = e32.decision_function(X.astype(np.float32))
    assert S32.dtype == np.float32 and e32.predict_proba(X.astype(np.float32)).dtype == np.float32
    e64 = clone(e32).fit(X, y)
    np.testing.assert_allclose(S32, e64.decision_function(X), atol=1e-3)


def test_predict_proba_on_the_simplex_and_consistent_with_predict():
    X, y = classification_data(seed=10)
    for update in ("linear", "softmax"):
        est = StagewiseClassifier(block_size=16, n_stages=2, update=update, inner_iter=5, pca_components=None,
                                  random_state=0).fit(X, y)
        P = est.predict_proba(X)
        assert np.all(P >= 0)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(P, axis=1)])


def test_warm_start_adds_stages():
    X, y = regression_data(seed=11)
    kw = dict(block_size=8, pca_components=3, update="calibrated", random_state=3)
    est = StagewiseRegressor(n_stages=2, warm_start=True, **kw).fit(X, y)
    est.set_params(n_stages=5).fit(X, y)
    full = StagewiseRegressor(n_stages=5, **kw).fit(X, y)
    assert est.n_iter_ == 5
    np.testing.assert_allclose(est.predict(X), full.predict(X), atol=1e-12)
    np.testing.assert_allclose(est.objective_history_, full.objective_history_, rtol=1e-12)
    with pytest.raises(ValueError, match="n_stages"):
        est.set_params(n_stages=3).fit(X, y)
    with pytest.raises(ValueError, match="warm_start"):
        est.set_params(n_stages=6).fit(X[:, :4], y)


def test_sample_weight_acts_as_repetition_and_class_weight_balanced():
    X, y = classification_data(n=90, seed=12)
    reps = np.random.default_rng(0).integers(0, 3, size=90)
    kw = dict(block_size=12, n_stages=3, pca_components=4, random_state=0)
    a = StagewiseClassifier(**kw).fit(X, y, sample_weight=reps)
    b = StagewiseClassifier(**kw).fit(np.repeat(X, reps, axis=0), np.repeat(y, reps))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-9)
    c = StagewiseClassifier(class_weight="balanced", **kw).fit(X, y)
    d = StagewiseClassifier(**kw).fit(X, y, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_allclose(c.decision_function(X), d.decision_function(X), atol=1e-12)


def test_predictions_in_row_chunks_equal_one_pass():
    X, y = regression_data(n=300)
    est = StagewiseRegressor(block_size=64, n_stages=2, pca_components=None, random_state=0).fit(X, y)
    full = est.predict(X)
    est.set_params(max_memory=20_000)  # a few dozen rows per chunk
    np.testing.assert_allclose(est.predict(X), full, atol=1e-12)


def test_memory_budget_is_checked_before_allocating():
    X, y = regression_data(n=3000, d=10)

    def fit():
        try:
            StagewiseRegressor(block_size=512, pca_components=None, sigma=1.0, max_memory="2MB").fit(X, y)
        except ValueError as err:
            return str(err)

    peak, message = peak_bytes(fit)
    assert "block_size" in message and "max_memory" in message
    assert peak < 1_000_000  # the block alone would be 3000 x 512 x 8 = 12 MB


def test_callback_stops_and_multi_output():
    X, y = regression_data()
    Y = np.column_stack([y, -2 * y])
    seen = []
    est = StagewiseRegressor(block_size=8, n_stages=10, pca_components=None, random_state=0,
                             callback=lambda info: seen.append(info["objective"]) or len(seen) == 3, verbose=1).fit(X, Y)
    assert est.n_iter_ == 3 and est.predict(X).shape == (200, 2)
    np.testing.assert_allclose(seen, est.objective_history_[1:])
    np.testing.assert_allclose(est.predict(X)[:, 1], -2 * est.predict(X)[:, 0], atol=1e-9)


def test_bad_input():
    X, y = classification_data(n=40, d=3)
    with pytest.raises(ValueError, match="block_size"):
        StagewiseClassifier(block_size=0).fit(X, y)
    with pytest.raises(ValueError, match="pca_components"):
        StagewiseClassifier(pca_components=5).fit(X, y)
    with pytest.raises(ValueError, match="one class"):
        StagewiseClassifier(pca_components=None).fit(X, np.ones(40))
    with pytest.raises(ValueError, match="update"):
        StagewiseRegressor(update="softmax").fit(X, y)
    with pytest.raises(ValueError, match="generator"):
        StagewiseRegressor(generator="wavelet").fit(X, y)
    with pytest.raises(ValueError, match="coincide"):  # median trick on identical points
        StagewiseRegressor(pca_components=None).fit(np.ones((10, 3)), np.arange(10.0))
    # zero-variance features: the ridge keeps every block fit well posed
    Xc = np.hstack([X, np.zeros((40, 2))])
    est = StagewiseRegressor("sample", block_size=5, n_stages=2, pca_components=None).fit(Xc, y.astype(float))
    assert np.all(np.isfinite(est.predict(Xc)))
