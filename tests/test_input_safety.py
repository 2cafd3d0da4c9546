"""Regression tests of issue 19 (items 1, 6, 7): hostile input never corrupts memory, fits leave
the process's BLAS thread count as they found it, and finite input never gives non-finite output.

Cases that crashed the interpreter run in a subprocess, so a regression fails one test instead of
killing the test run.
"""

import json
import re
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone, is_classifier
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import OpenBLASController, threadpool_info, threadpool_limits

import kernelscale
from kernelscale import (
    CalibratedLeastSquaresClassifier,
    GaussianKernel,
    GeneralizedLeastSquaresClassifier,
    LaplacianKernel,
    MaternKernel,
    PolynomialKernel,
    RegularizedKernelRegressor,
    SLKLClassifier,
    project_simplex,
)
from kernelscale.base.validation import check_sparse
from kernelscale.kernels import PolynomialKernel, median_heuristic

# ----------------------------------------------------------------------------------------------
# item 1: sparse structure is checked before scipy's conversions or compiled loops read it

CORRUPTIONS = """
import numpy as np, scipy.sparse as sp

def corrupt(kind, fmt="csr"):
    X = sp.random(200, 5, density=0.5, format=fmt, random_state=0, dtype=np.float64)
    if kind == "index_7":
        X.indices[-1] = 7
    elif kind == "index_huge":
        X.indices[-1] = 10**9
    elif kind == "index_negative":
        X.indices[0] = -1
    elif kind == "indptr_decreasing":
        X.indptr[3] = X.indptr[5]
    elif kind == "indptr_short_end":
        X.indptr[-1] -= 1
    elif kind == "indptr_not_zero":
        X.indptr[0] = 1
    elif kind == "data_nan":
        X.data[2] = np.nan
    elif kind == "coo_row":
        X.row[-1] = 10**9
    elif kind == "coo_col":
        X.col[0] = -3
    return X
"""

SPARSE_CASES = [("index_7", "csr"), ("index_huge", "csr"), ("index_negative", "csr"), ("indptr_decreasing", "csr"),
                ("indptr_short_end", "csr"), ("indptr_not_zero", "csr"), ("data_nan", "csr"), ("index_huge", "csc"),
                ("index_negative", "csc"), ("coo_row", "coo"), ("coo_col", "coo")]


def _run_isolated(body):
    """Run `body` in a fresh interpreter importing this kernelscale; it prints a JSON dict of
    outcomes as its last line."""
    source = os.path.dirname(os.path.dirname(kernelscale.__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, f"the subprocess died (rc={proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_corrupt_sparse_input_is_refused_by_every_sparse_entry_point():
    outcomes = _run_isolated(CORRUPTIONS + f"""
import json, warnings
warnings.simplefilter("ignore")
from kernelscale import RegularizedKernelClassifier, RegularizedKernelRegressor
from kernelscale.regularized.coordinate_descent import linear_coordinate_descent
from kernelscale.regularized.fixed_point import linear_fixed_point
y = np.r_[np.ones(100), -np.ones(100)]
good = sp.random(200, 5, density=0.5, format="csr", random_state=1)
fitted = {{
    "clf": RegularizedKernelClassifier(kernel="linear").fit(good, y),
    "reg": RegularizedKernelRegressor(kernel="linear", loss="absolute").fit(good, y),
    "clf_fp": RegularizedKernelClassifier(kernel="linear", solver="fixed_point").fit(good, y),
}}
calls = {{
    "clf.fit": lambda X: RegularizedKernelClassifier(kernel="linear").fit(X, y),
    "clf_fp.fit": lambda X: RegularizedKernelClassifier(kernel="linear", solver="fixed_point").fit(X, y),
    "reg.fit": lambda X: RegularizedKernelRegressor(kernel="linear", loss="absolute").fit(X, y),
    "clf.predict": lambda X: fitted["clf"].predict(X),
    "clf.decision_function": lambda X: fitted["clf"].decision_function(X),
    "clf_fp.predict": lambda X: fitted["clf_fp"].predict(X),
    "reg.predict": lambda X: fitted["reg"].predict(X),
    "linear_coordinate_descent": lambda X: linear_coordinate_descent(X, y),
    "linear_fixed_point": lambda X: linear_fixed_point(X, y),
}}
out = {{}}
for kind, fmt in {SPARSE_CASES!r}:
    for name, call in calls.items():
        try:
            call(corrupt(kind, fmt))
            out[f"{{name}} {{kind}} {{fmt}}"] = "accepted"
        except (ValueError, TypeError) as err:
            out[f"{{name}} {{kind}} {{fmt}}"] = f"{{type(err).__name__}}: {{err}}"
print(json.dumps(out))
""")
    accepted = [case for case, outcome in outcomes.items() if not outcome.startswith("ValueError: X")]
    assert not accepted, f"corrupt sparse X not refused with a ValueError naming X: {accepted}"
    assert "outside [0, 5)" in outcomes["clf.fit index_7 csr"]


@pytest.mark.parametrize("kind, fmt", SPARSE_CASES)
def test_check_sparse_names_the_defect(kind, fmt):
    namespace = {}
    exec(CORRUPTIONS, namespace)
    with pytest.raises(ValueError, match=r"^X(\.\w+)? .*(indices|indptr|row|col|NaN)"):
        check_sparse(namespace["corrupt"](kind, fmt))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "lil", "dok", "dia"])
def test_check_sparse_accepts_valid_matrices_of_every_format(fmt):
    X = sp.random(30, 7, density=0.3, format=fmt, random_state=0)
    assert check_sparse(X) is X
    assert check_sparse(sp.csr_array((0, 3))).shape == (0, 3)


def test_check_sparse_refuses_bad_index_dtypes_and_data():
    X = sp.random(20, 4, density=0.5, format="csr", random_state=0)
    X.indices = X.indices.astype(np.int16)
    with pytest.raises(ValueError, match="X.indices must be a 1-d int32 or int64 array"):
        check_sparse(X)
    X = sp.random(20, 4, density=0.5, format="csr", random_state=0)
    X.data = X.data.astype(complex)
    with pytest.raises(TypeError, match="X has dtype complex"):
        check_sparse(X)
    X.data = list(X.data)
    with pytest.raises(ValueError, match="X.data must be a numpy array"):
        check_sparse(X)


# ----------------------------------------------------------------------------------------------
# item 6: overlapping SLKL fits restore the BLAS thread count


def _blas_threads():
    return sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})


def _let_go():
    """threadpoolctl >= 3.7: let other threads change the OpenBLAS limit this thread set."""
    getattr(OpenBLASController, "clear_controlling_thread", lambda: None)()


def test_overlapping_slkl_fits_in_two_threads_restore_the_blas_thread_count():
    """A enters, B enters, A leaves (its thread stays alive, as in a pool), B leaves: a limit
    nested in B would "restore" 1, and a restore from B of A's limit would be ignored."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(120, 3)), np.repeat([0, 1], 60)
    a_in, b_in, a_out, b_out = (threading.Event() for _ in range(4))
    seen, errors = [], []

    def fit(mine, other, done):
        def callback(info):
            seen.append(_blas_threads())
            mine.set()
            other.wait(10)

        try:
            SLKLClassifier(n_components=20, random_state=0, callback=callback).fit(X, y)
        except Exception as err:  # reported below, in the main thread
            errors.append(err)
        done.set()
        b_out.wait(10)  # keep the thread alive until both fits are done

    outer = threadpool_limits(limits=2, user_api="blas")  # 2 even on a one-core machine
    _let_go()
    try:
        before = _blas_threads()
        first = threading.Thread(target=fit, args=(a_in, b_in, a_out))
        second = threading.Thread(target=fit, args=(b_in, a_out, b_out))
        first.start()
        assert a_in.wait(10)
        second.start()
        assert b_out.wait(30)
        after = _blas_threads()
        first.join(10)
        second.join(10)
    finally:
        outer.restore_original_limits()
        _let_go()
    assert not errors, errors
    assert seen and all(threads == [1] for threads in seen), seen
    assert after == before == [2]


# ----------------------------------------------------------------------------------------------
# item 7: finite input gives finite output


def _gemm_form_reference(kernel, X, Z):
    """The GEMM form as kernels.py computed it before the overflow handling (74f6b1d), step by step."""
    center = Z.mean(axis=0)

    def augmented(A, scale, shift, norm_last):
        out = np.empty((A.shape[0], A.shape[1] + 2), dtype=A.dtype)
        np.subtract(A, center, out=out[:, :-2])
        norms = np.einsum("ij,ij->i", out[:, :-2], out[:, :-2])
        out[:, -1 if norm_last else -2] = shift * norms
        out[:, :-2] *= scale
        out[:, -2 if norm_last else -1] = 1.0
        return out

    if isinstance(kernel, GaussianKernel):
        inv = 1.0 / kernel.sigma**2
        K = np.matmul(augmented(X, inv, -0.5 * inv, False), augmented(Z, 1.0, -0.5 / kernel.sigma**2, True).T)
        return np.exp(np.minimum(K, 0.0, out=K), out=K)
    K = np.matmul(augmented(X, -2.0, 1.0, False), augmented(Z, 1.0, 1.0, True).T)
    s = np.sqrt(np.maximum(K, 0.0, out=K), out=K)
    s *= np.sqrt(2.0 * kernel.nu) / kernel.sigma
    poly = {0.5: 1.0, 1.5: s + 1.0, 2.5: (s / 3.0 + 1.0) * s + 1.0}[kernel.nu]
    return np.exp(-s) * poly


DISTANCE_KERNELS = [GaussianKernel(1.7), GaussianKernel(0.05), MaternKernel(1.3, 0.5), MaternKernel(2.0, 1.5),
                    MaternKernel(0.9, 2.5)]


@pytest.mark.parametrize("kernel", DISTANCE_KERNELS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ordinary_blocks_are_bit_identical_to_the_gemm_form(kernel, dtype):
    rng = np.random.default_rng(3)
    X, Z = (rng.normal(size=(150, 9)) * 3 + 5).astype(dtype), (rng.normal(size=(70, 9)) * 2).astype(dtype)
    K = kernel(X, Z)
    expected = _gemm_form_reference(kernel, X, Z)
    assert K.dtype == dtype
    if isinstance(kernel, GaussianKernel):
        np.testing.assert_array_equal(K, expected)
    else:  # the reference's Matern profile is not written in kernels.py's in-place order
        np.testing.assert_allclose(K, expected, rtol=5 * np.finfo(dtype).eps, atol=5 * np.finfo(dtype).eps)


HUGE = [(1e160, np.float64), (1e300, np.float64), (1e20, np.float32), (1e37, np.float32)]
ALL_DISTANCE_KERNELS = DISTANCE_KERNELS + [LaplacianKernel(2.0)]


@pytest.mark.parametrize("kernel", ALL_DISTANCE_KERNELS, ids=repr)
@pytest.mark.parametrize("scale, dtype", HUGE)
def test_kernels_of_huge_finite_input_are_the_scaled_kernel(kernel, scale, dtype):
    """k(t x, t z) with bandwidth t sigma equals k(x, z): the overflowing squares are scaled away."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    X[1] = X[0] + 1e-3  # a close pair, far from the centre
    big = clone(kernel).set_params(sigma=kernel.sigma * scale)
    K = big((X * scale).astype(dtype))
    assert K.dtype == dtype and np.all(np.isfinite(K))
    # as close as the GEMM form gets in the dtype (float32: eps |x - c|^2 / sigma^2 ~ 3e-4 here)
    np.testing.assert_allclose(K, kernel(X.astype(dtype)), atol=1e-3 if dtype == np.float32 else 1e-9)


@pytest.mark.parametrize("kernel", ALL_DISTANCE_KERNELS + [GaussianKernel(1e-300), MaternKernel(1e-300, 2.5),
                                                           LaplacianKernel(1e-320)], ids=repr)
@pytest.mark.parametrize("scale, dtype", HUGE + [(1.0, np.float64), (1.0, np.float32), (3e38, np.float32),
                                                 (1.7e308, np.float64)])
def test_kernel_values_are_finite_and_in_range_for_every_finite_input(kernel, scale, dtype):
    X = np.random.default_rng(5).uniform(-1, 1, size=(30, 4)) * scale
    X[0] = X.max(axis=0)
    K = kernel(X.astype(dtype), X[::-1].astype(dtype))
    assert np.all(np.isfinite(K)) and K.min() >= 0 and K.max() <= 1


def test_median_bandwidth_of_huge_input_is_finite():
    X = np.random.default_rng(6).normal(size=(50, 3))
    assert median_heuristic(X * 1e160) == pytest.approx(median_heuristic(X) * 1e160, rel=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "matern", GaussianKernel(1e160)], ids=repr)
def test_absolute_loss_regression_on_huge_features_predicts_finite_values(kernel):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 3))
    y = np.sin(X[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RegularizedKernelRegressor(kernel=kernel, loss="absolute", max_iter=200).fit(X * 1e160, y)
    pred = model.predict(X * 1e160)
    assert np.all(np.isfinite(pred))
    assert model.score(X * 1e160, y) > 0.8


def test_overflowing_decision_values_are_refused_naming_X():
    rng = np.random.default_rng(8)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    model = RegularizedKernelRegressor(kernel=PolynomialKernel(degree=3), loss="absolute").fit(X, y)
    with pytest.raises(ValueError, match="decision values for X contain NaN or infinity .* rescale X"), \
            np.errstate(over="ignore", invalid="ignore"):
        model.predict(X * 1e120)


def test_project_simplex_of_huge_rows_is_a_point_of_the_simplex():
    np.testing.assert_array_equal(project_simplex([[1e17, 0]]), [[1.0, 0.0]])
    np.testing.assert_array_equal(project_simplex([[1e300, -1e300], [1.7e308, -1.7e308]]), [[1, 0], [1, 0]])
    np.testing.assert_array_equal(project_simplex(np.array([[1e20, 1e20]], dtype=np.float32)), [[0.5, 0.5]])


huge_rows = st.integers(1, 8).flatmap(lambda k: arrays(np.float64, (k,), elements=st.floats(-1e300, 1e300)))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(huge_rows, st.sampled_from([np.float64, np.float32]))
def test_project_simplex_returns_a_point_of_the_simplex_for_every_finite_row(v, dtype):
    v = np.clip(v, -1e38, 1e38).astype(dtype) if dtype == np.float32 else v
    p = project_simplex(v)
    assert p.dtype == dtype and np.all(p >= 0) and np.all(p <= 1)
    assert abs(p.sum(dtype=np.float64) - 1.0) <= 8 * v.size * np.finfo(dtype).eps
    assert p[np.argmax(v)] == p.max()  # the order of the coordinates is kept


@pytest.mark.parametrize("model, scale", [(GeneralizedLeastSquaresClassifier(link="identity"), 1e150),
                                          (CalibratedLeastSquaresClassifier(max_iter=5), 1e30)], ids=repr)
def test_projected_probabilities_of_huge_scores_lie_on_the_simplex(model, scale):
    X, y = load_iris(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    proba = model.predict_proba(X * scale)
    assert np.all(np.isfinite(proba)) and proba.min() >= 0 and proba.max() <= 1
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# issue 18: one validation boundary (the classes of deep and silent failures that
# benchmarks/tools/fuzz_estimators.py found; tests/test_estimator_fuzz.py fuzzes them all)

from kernelscale import (  # noqa: E402
    DoublyStochasticClassifier,
    DoublyStochasticRegressor,
    ExactKernelRidge,
    LSSVMRegressor,
    NystromFeatures,
    PolynomialRandomFeatures,
    RandomFourierFeatures,
    RegularizedKernelClassifier,
    SLKLRegressor,
)
from kernelscale.base.estimator import finite_r2_score  # noqa: E402
from kernelscale.preprocessing import CenterNormalize  # noqa: E402

_SUPERVISED = [ExactKernelRidge(alpha=1.0), GeneralizedLeastSquaresClassifier(max_iter=5),
               LSSVMRegressor(solver="exact", dtype=None), SLKLRegressor(n_components=10, random_state=0),
               DoublyStochasticRegressor(n_iter=5, random_state=0), RegularizedKernelRegressor(),
               RegularizedKernelClassifier(kernel="linear")]


def _data(n=20, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] > 0).astype(float)


@pytest.mark.parametrize("model", _SUPERVISED + [CenterNormalize(), NystromFeatures(n_components=5, random_state=0)],
                         ids=lambda m: type(m).__name__)
def test_non_numeric_strings_in_X_are_a_type_error_naming_X(model):
    X, y = _data()
    Xs = X.astype(object)
    Xs[0, 0] = "abc"
    args = () if isinstance(model, (CenterNormalize, NystromFeatures)) else (y,)
    with pytest.raises(TypeError, match=r"^X must hold numbers only \(could not convert"):
        clone(model).fit(Xs, *args)
    fitted = clone(model).fit(X, *args)
    method = getattr(fitted, "predict", None) or fitted.transform
    with pytest.raises(TypeError, match=r"^X must hold numbers only"):
        method(Xs)


@pytest.mark.parametrize("model", [m for m in _SUPERVISED if not is_classifier(m)],
                         ids=lambda m: type(m).__name__)
def test_string_targets_of_a_regressor_are_a_type_error_naming_y(model):
    X, _ = _data()
    with pytest.raises(TypeError, match=r"^y (has dtype <U1|must hold numbers)"):
        clone(model).fit(X, np.array(["a", "b"])[np.arange(20) % 2])


def test_string_sample_weights_are_a_type_error_naming_sample_weight():
    X, y = _data()
    with pytest.raises(TypeError, match=r"^sample_weight must hold numbers only"):
        ExactKernelRidge().fit(X, y, sample_weight=np.array(["x"] * 20, dtype=object))


@pytest.mark.parametrize("model", [ExactKernelRidge(), RandomFourierFeatures(n_components=8, random_state=0),
                                   DoublyStochasticClassifier(n_iter=3, random_state=0)], ids=repr)
def test_median_bandwidth_at_the_end_of_the_float_range_is_finite_or_refused_naming_X(model):
    X, y = _data()
    X = np.clip(X * 1e308, -1.7e308, 1.7e308)  # pairwise distances beyond the float range
    args = () if isinstance(model, RandomFourierFeatures) else (y,)
    with pytest.raises(ValueError, match=r"median distance between points of X is inf.*rescale X"):
        clone(model).fit(X, *args)
    X[:, 1:] = 0.0
    X[:, 0] = np.linspace(-1.7e308, -1e308, 20)  # distances < 1e308: the median exists
    assert np.isfinite(kernelscale.kernels.median_heuristic(X))
    assert np.isfinite(median_heuristic(X, sample_weight=np.full(20, 1e300)))
    assert median_heuristic(X, sample_weight=np.full(20, 1e-300)) == median_heuristic(X)


def test_slkl_model_without_active_columns_predicts_zeros():
    X, _ = _data()
    for y in (np.zeros(20), np.zeros((20, 2))):
        model = SLKLRegressor(n_components=20, random_state=0).fit(X, y)
        assert model.n_active_ == 0
        np.testing.assert_array_equal(model.predict(X[:3]), np.zeros((3,) + y.shape[1:]))


def test_slkl_refuses_an_alpha_whose_square_underflows_or_overflows_and_names_overflow():
    X, y = _data()
    for alpha in (1e-300, 1e300):
        with pytest.raises(ValueError, match=rf"alpha={re.escape(repr(alpha))} is outside .* pass 1e-150 <= alpha <= 1e150"):
            SLKLRegressor(n_components=10, alpha=alpha, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"SLKL produced non-finite weights.*rescale X or y"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SLKLRegressor(n_components=10, random_state=0).fit(X, y * 1e300 - 0.5e300)


def test_exact_solves_of_overflowing_systems_are_refused_naming_the_inputs():
    """sqrt(sample_weight) overflows float32: the solve (once a LinAlgError from lstsq) is refused."""
    X, y = _data()
    model = LSSVMRegressor(kernel=GaussianKernel(1.0), solver="exact", dtype=None)
    with pytest.raises(ValueError, match=r"kernel system could not be solved.*rescale X and y.*sample_weight"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X.astype(np.float32), np.c_[y, -y], sample_weight=np.full(20, 1e300))
    with pytest.raises(ValueError, match=r"sample_weight contains infinity"):  # refused by the validation
        ExactKernelRidge(kernel=GaussianKernel(1.0)).fit(X.astype(np.float32), y, sample_weight=np.full(20, 1e300))


def test_random_maps_larger_than_memory_are_refused_naming_the_hyperparameter():
    X, _ = _data()
    with pytest.raises(ValueError, match=r"^n_components=10\*\*15|^n_components=1000000000000000 need"):
        RandomFourierFeatures(n_components=10**15).fit(X)
    with pytest.raises(ValueError, match=r"and degree=1000000000000000 need .* lower n_components or degree"):
        PolynomialRandomFeatures(PolynomialKernel(degree=10**15), n_components=8).fit(X)


def test_the_integer_true_is_one_component():
    """True passes scikit-learn's Integral constraint; shapes and numpy's choice() need an int."""
    X, y = _data()
    assert NystromFeatures(n_components=True, random_state=0).fit(X).transform(X).shape == (20, 1)
    model = SLKLRegressor(n_components=True, random_state=0).fit(X, y)
    assert model.candidates_.shape == (1,) and model.predict(X).shape == (20,)


def test_center_normalize_of_rows_at_the_ends_of_the_float_range_are_unit_rows():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 5))
    ordinary = CenterNormalize().fit(X).transform(X)
    scaled = np.vstack([X[:2] * 1e300, X[2:4] * 1e-300, X[4:]])
    out = CenterNormalize().fit(X).transform(scaled)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ordinary, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(out[4:], ordinary[4:])  # ordinary rows are untouched
    out32 = CenterNormalize().fit(X).transform((X * 1e30).astype(np.float32))
    assert out32.dtype == np.float32 and np.all(np.isfinite(out32))


def test_two_class_decision_values_that_overflow_are_refused_naming_X():
    X, y = _data()
    model = GeneralizedLeastSquaresClassifier(link="identity").fit(X, y)
    big = np.full((2, 3), 1.7e308) * np.sign(model.coef_[1] - model.coef_[0])
    with pytest.raises(ValueError, match=r"decision values for X contain NaN or infinity.*rescale X"), \
            np.errstate(over="ignore"):
        model.decision_function(big)


def test_partial_fit_of_a_column_of_labels_is_the_partial_fit_of_the_labels():
    X, y = _data()
    a = DoublyStochasticClassifier(n_iter=3, random_state=0).partial_fit(X, y, classes=[0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DataConversionWarning, as for fit
        b = DoublyStochasticClassifier(n_iter=3, random_state=0).partial_fit(X, y[:, None], classes=[0.0, 1.0])
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    with pytest.raises(ValueError, match="y should be a 1d array"):
        DoublyStochasticClassifier(n_iter=3).partial_fit(X, np.c_[y, y], classes=[0.0, 1.0])


@pytest.mark.parametrize("name", ["cache_size", "max_memory"])
def test_memory_strings_are_checked_on_the_linear_path_too(name):
    X, y = _data()
    with pytest.raises(ValueError, match=rf"^{name}='abc' is not a memory size"):
        RegularizedKernelClassifier(kernel="linear", **{name: "abc"}).fit(X, y)


def test_r2_score_is_scikit_learns_on_ordinary_data_and_finite_at_the_ends_of_the_float_range():
    from sklearn.metrics import r2_score

    rng = np.random.default_rng(2)
    y, p, w = rng.normal(size=30), rng.normal(size=30), rng.uniform(0.5, 2, size=30)
    assert finite_r2_score(y, p, w) == r2_score(y, p, sample_weight=w)
    assert finite_r2_score(y * 1e300, p * 1e300) == pytest.approx(r2_score(y, p), rel=1e-12)
    assert finite_r2_score(y, y * 1e300) == -np.finfo(np.float64).max  # below the float range
    assert finite_r2_score(np.full(5, 1e300), np.full(5, 1e300)) == 1.0
    assert np.isnan(finite_r2_score([1.0], [2.0]))  # one sample: undefined, as scikit-learn's
    model = RegularizedKernelRegressor().fit(*_data())
    assert np.isfinite(model.score(_data()[0], _data()[1] * 1e300))
