"""Tests of kernelscale.preprocessing: the image transforms of paper 4 against per-image loops,
and the weighted PCA (paper 5's input reduction) against scikit-learn's PCA."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelscale import load, save
from kernelscale.kernels import PolynomialKernel
from kernelscale.lssvm.estimators import LSSVMClassifier
from kernelscale.preprocessing import (
    CenterNormalize,
    FFTFeatures,
    GaussianCenterFilter,
    image_shape_of,
    pca_fit,
    pca_transform,
)


def images(n=7, shape=(5, 5), seed=0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(0, 1, size=(n, int(np.prod(shape)))).astype(dtype)


# ----------------------------------------------------------------------------------------------
# direct per-image references


def ref_center_normalize(x):
    x = x - x.sum() / x.size  # eq. 61
    return x / np.sqrt(np.sum(x * x))  # eq. 62


def ref_fft(x, shape, order):
    """eqs. 69-75 for one flattened row-major image of shape (channels, L, L)."""
    xi = x.astype(np.float64)  # 69
    xi = xi - xi.mean()  # 70
    img = xi.reshape(shape)
    if order == "F":  # the columns of each channel, one after the other
        vec = np.concatenate([img[c][:, j] for c in range(shape[0]) for j in range(shape[2])])
    else:
        vec = xi
    N = vec.size
    dft = np.array([np.sum(vec * np.exp(-2j * np.pi * f * np.arange(N) / N)) for f in range(N // 2)])
    phi = np.sqrt(np.abs(dft))  # 71, first half of the values
    phi = phi - phi.mean()  # 72
    xi = xi / np.linalg.norm(xi)  # 73
    phi = phi / np.linalg.norm(phi)  # 74
    return np.concatenate([xi, phi]) / np.sqrt(2)  # 75


def ref_filter(x, shape, c=None):
    channels, L, _ = shape
    c = 4.0 / L**2 if c is None else c
    out = x.astype(np.float64).reshape(shape).copy()
    for ch in range(channels):
        for i in range(1, L + 1):
            for j in range(1, L + 1):
                out[ch, i - 1, j - 1] *= np.exp(-c * ((i - L / 2) ** 2 + (j - L / 2) ** 2))  # eq. 76
    return out.ravel()


# ----------------------------------------------------------------------------------------------
# CenterNormalize


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_center_normalize_matches_per_image_reference(dtype):
    X = images(shape=(4, 6), dtype=dtype)  # any vectors, not only square images
    out = CenterNormalize().fit_transform(X)
    assert out.dtype == dtype
    expected = np.array([ref_center_normalize(x.astype(np.float64)) for x in X])
    np.testing.assert_allclose(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    assert np.shares_memory(out, X) is False


def test_center_normalize_leaves_constant_images_at_zero():
    X = np.vstack([np.full(9, 3.0), images(n=1, shape=(3, 3))[0]])
    out = CenterNormalize().fit_transform(X)
    assert np.all(out[0] == 0) and np.isclose(np.linalg.norm(out[1]), 1.0)


# ----------------------------------------------------------------------------------------------
# FFTFeatures


@pytest.mark.parametrize("shape, image_shape", [((5, 5), None), ((6, 6), (6, 6)), ((3, 4, 4), (3, 4, 4))])
@pytest.mark.parametrize("order", ["F", "C"])
def test_fft_features_match_per_image_reference(shape, image_shape, order):
    full = shape if len(shape) == 3 else (1,) + shape
    X = images(shape=shape, seed=1)
    out = FFTFeatures(image_shape=image_shape, order=order).fit_transform(X)
    d = X.shape[1]
    assert out.shape == (X.shape[0], d + d // 2)
    expected = np.array([ref_fft(x, full, order) for x in X])
    # atol: the reference's zero frequency is sqrt(|rounding of a zero sum|) ~ 1e-8
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0)


def test_fft_features_of_mnist_sized_images_have_1176_values_in_float32():
    X = images(n=3, shape=(28, 28), dtype=np.float32)
    out = FFTFeatures().fit_transform(X)
    assert out.shape == (3, 1176) and out.dtype == np.float32
    np.testing.assert_allclose(out, np.array([ref_fft(x, (1, 28, 28), "F") for x in X]), atol=2e-6)


def test_fft_order_matters_and_F_is_the_transposed_image():
    X = images(n=2, shape=(6, 6), seed=2)
    XT = X.reshape(2, 6, 6).transpose(0, 2, 1).reshape(2, 36)
    f = FFTFeatures(order="F").fit_transform(X)
    c = FFTFeatures(order="C").fit_transform(XT)
    np.testing.assert_allclose(f[:, 36:], c[:, 36:], atol=1e-7)  # same FFT part
    assert not np.allclose(f[:, 36:], FFTFeatures(order="C").fit_transform(X)[:, 36:])


# ----------------------------------------------------------------------------------------------
# GaussianCenterFilter


@pytest.mark.parametrize(
    "shape, image_shape, c", [((6, 6), None, None), ((3, 5, 5), (3, 5, 5), None), ((4, 4), (4, 4), 0.3)]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gaussian_filter_matches_double_loop(shape, image_shape, c, dtype):
    full = shape if len(shape) == 3 else (1,) + shape
    X = images(shape=shape, seed=3, dtype=dtype)
    out = GaussianCenterFilter(image_shape=image_shape, c=c).fit_transform(X)
    assert out.dtype == dtype
    expected = np.array([ref_filter(x, full, c) for x in X])
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.float32 else 1e-13)


def test_gaussian_filter_peaks_at_the_papers_centre():
    G = GaussianCenterFilter().gaussian_filter(32)
    assert G[15, 15] == 1.0 and G.max() == 1.0  # i = j = L/2 = 16 (1-based)
    np.testing.assert_allclose(G[15, 31], np.exp(-4 / 32**2 * 16**2))


# ----------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("transform", [FFTFeatures(), GaussianCenterFilter()])
def test_wrong_image_sizes_are_refused(transform):
    with pytest.raises(ValueError, match="not a square number.*image_shape"):
        clone(transform).fit(np.ones((2, 10)))
    with pytest.raises(ValueError, match="holds 16 values but X has 25"):
        clone(transform).set_params(image_shape=(4, 4)).fit(np.ones((2, 25)))
    with pytest.raises(ValueError, match="not square"):
        clone(transform).set_params(image_shape=(2, 8)).fit(np.ones((2, 16)))
    with pytest.raises(ValueError, match="image_shape must be"):
        clone(transform).set_params(image_shape=(1, 2, 2, 2)).fit(np.ones((2, 8)))
    fitted = clone(transform).fit(np.ones((2, 16)))
    with pytest.raises(ValueError, match="features"):
        fitted.transform(np.ones((2, 25)))


def test_image_shape_inference():
    assert image_shape_of(784) == (1, 28, 28)
    assert image_shape_of(3072, (3, 32, 32)) == (3, 32, 32)
    with pytest.raises(ValueError, match="3072"):
        image_shape_of(3072)


# ----------------------------------------------------------------------------------------------
# scikit-learn compatibility, persistence, the paper's pipeline

# scikit-learn's checks feed 2, 3, 5 or 10 features, which are not images: these checks fail
# by design (the transforms refuse non-square inputs, as they must)
NON_IMAGE_CHECKS = {
    name: "feeds non-square (non-image) data"
    for name in [
        "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_estimators_dtypes",
        "check_dtype_object", "check_pipeline_consistency", "check_estimators_nan_inf", "check_estimators_pickle",
        "check_f_contiguous_array_estimator", "check_transformer_data_not_an_array", "check_transformer_general",
        "check_transformer_preserve_dtypes", "check_methods_sample_order_invariance",
        "check_methods_subset_invariance", "check_fit2d_1sample", "check_dict_unchanged", "check_fit_idempotent",
        "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
    ]
}


@parametrize_with_checks(
    [CenterNormalize(), FFTFeatures(), GaussianCenterFilter()],
    expected_failed_checks=lambda est: {} if isinstance(est, CenterNormalize) else NON_IMAGE_CHECKS,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("transform", [CenterNormalize(), FFTFeatures(order="C"), GaussianCenterFilter(c=0.1)])
def test_save_load_round_trip(transform, tmp_path):
    X = images(shape=(4, 4))
    fitted = clone(transform).fit(X)
    save(fitted, tmp_path / "t.ks")
    loaded = load(tmp_path / "t.ks")
    assert loaded.get_params() == fitted.get_params()
    np.testing.assert_array_equal(loaded.transform(X), fitted.transform(X))


def test_papers_pipeline_classifies_digits():
    """Filter + FFT features + the paper's LS-SVM (poly degree 4, C = 1e4, float32) on 8 x 8 digits."""
    digits = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(
        digits.data[:900] / 16.0, digits.target[:900], test_size=0.3, random_state=0, stratify=digits.target[:900]
    )
    model = make_pipeline(
        GaussianCenterFilter(c=1.0 / 64),
        FFTFeatures(),
        LSSVMClassifier(
            PolynomialKernel(degree=4, gamma=1.0, coef0=0.0), C=1e4, batch_size=200, n_iter=10, dtype=np.float32, random_state=0
        ),
    ).fit(X_train, y_train)
    assert np.mean(model.predict(X_test) != y_test) < 0.05


@pytest.mark.parametrize("transform", [FFTFeatures(), GaussianCenterFilter()])
def test_a_refused_refit_keeps_the_fitted_transform(transform):
    rng = np.random.default_rng(0)
    fitted = transform.fit(rng.random((5, 64)))
    before = fitted.transform(rng.random((3, 64)))
    with pytest.raises(ValueError, match="square"):
        fitted.fit(rng.random((5, 63)))  # not an image: refused, the 64-pixel fit stays
    assert fitted.n_features_in_ == 64
    np.testing.assert_array_equal(fitted.transform(rng.random((3, 64))).shape, before.shape)


# ----------------------------------------------------------------------------------------------
# weighted PCA


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


def test_pca_signs_dtype_row_blocks_and_errors():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 5)) * [5.0, 4.0, 3.0, 2.0, 1.0]
    mean, components = pca_fit(X, 2)
    assert mean.dtype == components.dtype == np.float64 and components.shape == (5, 2)
    top = np.abs(components).argmax(axis=0)
    assert np.all(components[top, [0, 1]] > 0)  # deterministic signs
    full = pca_transform(X, mean, components)
    np.testing.assert_allclose(pca_transform(X, mean, components, max_memory=6_000), full, rtol=1e-12, atol=1e-12)
    Z32 = pca_transform(X.astype(np.float32), mean, components)
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, full, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"pca_components=6 is larger than the number of features d=5"):
        pca_fit(X, 6)
    with pytest.raises(ValueError, match="pca_components must be an integer"):
        pca_fit(X, 0)
