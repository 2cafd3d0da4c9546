"""The fused kernel products (kernelscale.ops.fused) against scikit-learn's kernel formulas.

Without a CUDA GPU the Triton kernels run in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1,
set here before triton is first imported; small sizes); tests marked ``gpu`` run them compiled
where torch sees a CUDA GPU. The torch backend's products use them on CUDA in float32 only
(kernelscale.ops.torch_backend.FUSED_*): here they are also routed through the interpreter on
torch's CPU kernels to test that wiring without a GPU.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()
if not CUDA and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # one mode per process: set before triton is imported
pytest.importorskip("triton", reason="triton is not installed (it ships with torch's CUDA builds)")

from kernelscale.kernels import GaussianKernel, LaplacianKernel, MaternKernel, PolynomialKernel  # noqa: E402
from kernelscale.ops import KernelOperator, fused, kernel_matvec  # noqa: E402
from kernelscale.ops import torch_backend as tb  # noqa: E402
from kernelscale.ops.backend import get_backend, using  # noqa: E402

INTERPRETER = fused.interpreting()


def gpu(test):
    """Marked ``gpu`` (pyproject.toml) and run only where torch sees a CUDA GPU."""
    return pytest.mark.gpu(pytest.mark.skipif(not CUDA, reason="no CUDA GPU visible to torch")(test))


def compiled(test):
    """A gpu test that also needs Triton compiling (not its interpreter)."""
    reason = "TRITON_INTERPRET is set: Triton does not compile"
    return gpu(pytest.mark.skipif(CUDA and INTERPRETER, reason=reason)(test))


interpreter = pytest.mark.skipif(
    not INTERPRETER, reason="Triton's interpreter is off (TRITON_INTERPRET=1 runs these on the CPU)")

KERNELS = [
    pytest.param(GaussianKernel(2.5), id="gaussian"),
    pytest.param(LaplacianKernel(6.0), id="laplacian"),
    pytest.param(MaternKernel(2.0, nu=0.5), id="matern0.5"),
    pytest.param(MaternKernel(2.0, nu=1.5), id="matern1.5"),
    pytest.param(MaternKernel(2.0, nu=2.5), id="matern2.5"),
]


def sklearn_matrix(kernel, X, Z):
    """K(X, Z) in float64 by scikit-learn's formulas (independent of kernelscale's)."""
    X, Z = np.asarray(X, np.float64), np.asarray(Z, np.float64)
    if isinstance(kernel, GaussianKernel):
        return rbf_kernel(X, Z, gamma=1.0 / (2 * kernel.sigma**2))
    if isinstance(kernel, LaplacianKernel):
        return laplacian_kernel(X, Z, gamma=1.0 / kernel.sigma)
    return Matern(length_scale=kernel.sigma, nu=kernel.nu)(X, Z)


def data(n, m, d, k, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = (scale * rng.normal(size=(n, d)) + 3.0).astype(np.float32)  # off-centre: the centring matters
    Z = (scale * rng.normal(size=(m, d)) + 3.0).astype(np.float32)
    V = rng.normal(size=(m,) if k is None else (m, k)).astype(np.float32)
    return X, Z, V


def check(got, ref, rtol):
    got = got.detach().cpu().numpy() if isinstance(got, torch.Tensor) else got
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=rtol * max(np.abs(ref).max(), 1e-30))


def tensors(*arrays, device="cpu"):
    return [torch.as_tensor(a, device=device) for a in arrays]


# ----------------------------------------------------------------------------------------------
# anywhere


def test_importing_the_module_does_not_import_triton():
    code = ("import sys, kernelscale.ops.fused, kernelscale.ops.torch_backend; "
            "print('triton' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_without_triton_nothing_is_available(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else find_spec(name, *a))
    assert not fused.triton_available()
    assert not fused.fused_available("cuda", GaussianKernel(1.0))


def test_available_only_for_supported_resolved_kernels_on_cuda():
    assert fused.fused_kernel_spec(GaussianKernel(2.0)) == ("gaussian", 2.0, None)
    assert fused.fused_kernel_spec(LaplacianKernel(3)) == ("laplacian", 3.0, None)
    assert fused.fused_kernel_spec(MaternKernel(1.0, nu=2.5)) == ("matern", 1.0, 2.5)
    assert fused.fused_kernel_spec(GaussianKernel()) is None  # sigma="median" not resolved
    assert fused.fused_kernel_spec(PolynomialKernel()) is None
    assert not fused.fused_available("cpu", GaussianKernel(1.0))
    assert not fused.fused_available("cpu")
    assert fused.fused_available("cuda", GaussianKernel(1.0)) == (CUDA and not INTERPRETER)


def test_bad_arguments_raise_clear_errors():
    X, Z, V = tensors(*data(5, 6, 3, 2))
    with pytest.raises(ValueError, match="float32"):
        fused.fused_matvec(GaussianKernel(1.0), X.double(), Z, V)
    with pytest.raises(ValueError, match="GaussianKernel"):
        fused.fused_matvec(PolynomialKernel(), X, Z, V)
    with pytest.raises(ValueError, match="V must have shape"):
        fused.fused_matvec(GaussianKernel(1.0), X, Z, V[:4])
    with pytest.raises(ValueError, match="precision"):
        fused.fused_matvec(GaussianKernel(1.0), X, Z, V, precision="bf16")
    with pytest.raises(TypeError, match="torch tensors"):
        fused.fused_matvec(GaussianKernel(1.0), X.numpy(), Z, V)


def tf32(a):
    """a as a TF32 tensor core reads it: the low 13 mantissa bits ignored."""
    return torch.bitwise_and(a.view(torch.int32), -8192).view(torch.float32).double()


@pytest.mark.parametrize("kernel", [GaussianKernel(28.0), MaternKernel(28.0, nu=0.5)], ids=["gaussian", "matern0.5"])
def test_tf32_operands_emulated_keep_their_error_bounds(kernel):
    """The operands as the GPU's tensor cores read them (TF32 inputs, products and sums in
    float64 here: only the inputs' rounding counts): "tf32x3" (heads and tails) is as accurate as
    float32's GEMM form, "tf32" within 2e-4 (the module docstring's figures)."""
    gen = torch.Generator().manual_seed(0)
    X, Z = torch.randn(64, 784, generator=gen), torch.randn(3000, 784, generator=gen)
    V = torch.randn(3000, 2, generator=gen)
    spec = fused.fused_kernel_spec(kernel)
    Xa, Za, scale = fused._operands(spec, X, Z, None, fused._width(spec, 784, 32))
    Xh, Xt = fused._head_tail(Xa)
    Zh, Zt = fused._head_tail(Za)
    assert torch.equal(tf32(Xh), Xh.double()) and torch.equal(tf32(Zh), Zh.double())  # heads are TF32

    def product(u):
        if spec[0] == "gaussian":
            K = torch.exp2(u.clamp(max=0))
        else:
            K = torch.exp(-(u.clamp(min=0).sqrt() * scale).clamp(max=fused.S_MAX))
        return (K @ V.double()).numpy()

    ref = sklearn_matrix(kernel, X.numpy(), Z.numpy()) @ V.double().numpy()
    float32 = product((Xa @ Za.T).double())
    split = product(tf32(Xt) @ Zh.double().T + Xh.double() @ tf32(Zt).T + Xh.double() @ Zh.double().T)
    single = product(tf32(Xa) @ tf32(Za).T)
    scale_ref = np.abs(ref).max()
    err = {name: np.abs(got - ref).max() / scale_ref for name, got in
           (("float32", float32), ("tf32x3", split), ("tf32", single))}
    assert err["tf32x3"] <= max(2e-6, 1.5 * err["float32"]), err
    assert err["tf32"] <= 2e-4, err


# ----------------------------------------------------------------------------------------------
# in Triton's interpreter, on the CPU


@interpreter
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("d", [11, 32])  # 11: the last feature step masked
def test_interpreter_matches_sklearn(kernel, k, d):
    X, Z, V = data(37, 53, d, k)  # 2 row tiles and 2 column tiles of the interpreter's 32, both ragged
    ref = sklearn_matrix(kernel, X, Z)
    out, sums = fused.fused_matvec(kernel, *tensors(X, Z, V), row_sums=True)
    check(out, ref @ V.astype(np.float64), 2e-6)
    check(sums, ref.sum(axis=1), 2e-6)


@interpreter
@pytest.mark.parametrize("kernel", KERNELS)
def test_interpreter_column_splits_and_passes_add_up(kernel):
    X, Z, V = data(20, 100, 7, 40, seed=1)  # 40 columns of V: two passes of MAX_K_PER_PASS
    ref = sklearn_matrix(kernel, X, Z)
    for splits in (1, 2, 4):
        out, sums = fused.fused_matvec(kernel, *tensors(X, Z, V), row_sums=True, splits=splits)
        check(out, ref @ V.astype(np.float64), 2e-6)
        check(sums, ref.sum(axis=1), 2e-6)


@interpreter
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [11, 40])  # operands padded to 32, 64 columns: steps of 32 features
def test_interpreter_other_tiles(kernel, d):
    X, Z, V = data(9, 40, d, 2, seed=2)
    out = fused.fused_matvec(kernel, *tensors(X, Z, V), config=(16, 32, 32, 4, 1))
    check(out, sklearn_matrix(kernel, X, Z) @ V, 2e-6)


@interpreter
@pytest.mark.parametrize("precision", fused.PRECISIONS)
def test_interpreter_precisions(precision):
    X, Z, V = data(10, 20, 5, 2)
    out = fused.fused_matvec(GaussianKernel(2.0), *tensors(X, Z, V), precision=precision)
    check(out, sklearn_matrix(GaussianKernel(2.0), X, Z) @ V, 2e-3 if precision == "tf32" else 2e-6)


@interpreter
def test_interpreter_edge_cases():
    X, Z, V = tensors(*data(6, 8, 3, 2))
    kernel = GaussianKernel(1.5)
    ref = sklearn_matrix(kernel, X.numpy(), Z.numpy())
    out, sums = fused.fused_matvec(kernel, X, Z, V[:, :0], row_sums=True)  # row sums only
    assert out.shape == (6, 0)
    check(sums, ref.sum(axis=1), 2e-6)
    assert fused.fused_matvec(kernel, X[:0], Z, V).shape == (0, 2)
    assert torch.all(fused.fused_matvec(kernel, X, Z[:0], V[:0]) == 0)
    # a point against itself: k = 1 exactly at distance 0, also with an infinite Laplacian rate
    same = fused.fused_matvec(LaplacianKernel(1e-300), X, X, torch.ones(6, dtype=torch.float32))
    check(same, np.ones(6), 0)
    # a bandwidth so small that s overflows: clamped at S_MAX, so k is 0 and not inf * 0 = NaN
    # (at distance 0 the GEMM form's rounding decides between 0 and 1, as in the blocked path)
    tiny = fused.fused_matvec(MaternKernel(1e-30, nu=2.5), X, X, torch.ones(6, dtype=torch.float32)).numpy()
    assert np.all((tiny >= 0) & (tiny <= 1))  # NaN fails


@interpreter
def test_interpreter_overflowing_norms_are_refused():
    X, Z, V = tensors(*data(4, 5, 3, 1, scale=1e19))
    with pytest.raises(ValueError, match="overflows float32"):
        fused.fused_matvec(GaussianKernel(1.0), X, Z, V)
    assert fused.fused_matvec(GaussianKernel(1.0), X, Z, V, check_overflow=False) is None


@pytest.fixture
def fused_on_torch_cpu(monkeypatch):
    """The torch backend's fused products on torch's CPU kernels (through the interpreter), at any
    size; returns the list of fused_matvec calls made."""
    calls = []
    original = fused.fused_matvec

    def spy(*args, **kwargs):
        calls.append(args[1].shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(tb, "FUSED_PRODUCTS", True)
    monkeypatch.setattr(tb, "FUSED_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(tb, "FUSED_MIN_FLOPS", 0)
    monkeypatch.setattr(fused, "fused_available", lambda *a, **k: True)
    monkeypatch.setattr(fused, "fused_matvec", spy)
    return calls


@interpreter
@pytest.mark.parametrize("kernel", KERNELS)
def test_interpreter_torch_backend_products_use_the_fused_kernels(kernel, fused_on_torch_cpu):
    X, Z, V = data(70, 45, 6, 2, seed=3)
    rows = [1, 4, 9]
    with using(get_backend("cpu")):
        got = kernel_matvec(kernel, X, Z, V)
        op = KernelOperator(kernel, Z, max_memory="1MB")
        predict, matvec = op.predict(X, V), op.matvec(V[:, 0], rows=rows)
    assert len(fused_on_torch_cpu) == 3
    assert got.dtype == predict.dtype == matvec.dtype == np.float32
    check(got, sklearn_matrix(kernel, X, Z) @ V, 2e-6)
    check(predict, sklearn_matrix(kernel, X, Z) @ V, 2e-6)
    # rows of Z against Z, distance 0 included: there the GEMM form's rounding, amplified by
    # Matern nu=1/2's sqrt, reaches 3e-4 in the blocked float32 path too; no worse than it
    ref = sklearn_matrix(kernel, Z[rows], Z) @ V[:, 0]
    blocked = np.abs(KernelOperator(kernel, Z).matvec(V[:, 0], rows=rows) - ref).max()
    check(matvec, ref, max(2e-6, 2 * blocked / np.abs(ref).max()))


@interpreter
def test_interpreter_torch_backend_fused_products_split_rows_within_the_budget(fused_on_torch_cpu, monkeypatch):
    X, Z, V = data(300, 40, 5, 1, seed=4)
    ref = KernelOperator(GaussianKernel(2.0), Z).predict(X, V)
    with using(get_backend("cpu")):
        op = KernelOperator(GaussianKernel(2.0), Z, max_memory="1MB")
        fixed, per_row = op.backend.fused_product_bytes(5, 40, 1)  # the budget left: 100 rows
        monkeypatch.setattr(tb.TorchBackend, "fused_product",
                            lambda self, kern, A, prep, W, budget, f=tb.TorchBackend.fused_product:
                            f(self, kern, A, prep, W, fixed + 100 * per_row))
        got = op.predict(X, V)
    assert fused_on_torch_cpu == [100, 100, 100]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@interpreter
def test_interpreter_torch_backend_falls_back(fused_on_torch_cpu, monkeypatch):
    X, Z, V = data(30, 20, 4, 1, seed=5)
    with using(get_backend("cpu")):
        kernel_matvec(PolynomialKernel(), X, Z, V)  # not a fused kernel
        kernel_matvec(GaussianKernel(1.0), X.astype(np.float64), Z, V)  # float64
        big = kernel_matvec(GaussianKernel(1.0), X * np.float32(1e19), Z * np.float32(1e19), V)  # norms overflow
        monkeypatch.setattr(tb, "FUSED_PRODUCTS", False)
        kernel_matvec(GaussianKernel(1.0), X, Z, V)
    assert len(fused_on_torch_cpu) == 1  # only the overflowing one tried, and fell back
    assert np.all(np.isfinite(big))


# ----------------------------------------------------------------------------------------------
# compiled, on a CUDA GPU


GPU_CASES = [pytest.param(p.values[0], None, id=f"{p.id}-default") for p in KERNELS] + [
    pytest.param(GaussianKernel(2.5), precision, id=f"gaussian-{precision}") for precision in fused.PRECISIONS]


@compiled
@pytest.mark.parametrize("kernel, precision", GPU_CASES)
@pytest.mark.parametrize("k", [None, 10])
def test_gpu_matches_sklearn(kernel, precision, k):
    rtol = 3e-3 if precision == "tf32" else 1e-5
    X, Z, V = data(1500, 2300, 50, k, seed=6)
    ref = sklearn_matrix(kernel, X, Z)
    out, sums = fused.fused_matvec(kernel, *tensors(X, Z, V, device="cuda"), row_sums=True, precision=precision)
    check(out, ref @ V.astype(np.float64), rtol)
    check(sums, ref.sum(axis=1), rtol)


@compiled
@pytest.mark.parametrize("precision", fused.PRECISIONS)
def test_gpu_many_columns_take_the_dot_path(precision):
    X, Z, V = data(700, 900, 30, 20, seed=8)  # 21 columns with the row sums: one tl.dot per tile
    ref = sklearn_matrix(GaussianKernel(4.0), X, Z)
    out, sums = fused.fused_matvec(GaussianKernel(4.0), *tensors(X, Z, V, device="cuda"), row_sums=True,
                                   precision=precision)
    check(out, ref @ V.astype(np.float64), 3e-3 if precision == "tf32" else 1e-5)
    check(sums, ref.sum(axis=1), 3e-3 if precision == "tf32" else 1e-5)


@compiled
def test_gpu_kernel_matvec_is_fused_above_the_threshold_and_equals_numpy(monkeypatch):
    monkeypatch.setattr(tb, "FUSED_PRODUCTS", True)
    calls = []
    original = fused.fused_matvec
    monkeypatch.setattr(fused, "fused_matvec", lambda *a, **k: calls.append(1) or original(*a, **k))
    X, Z, V = data(6000, 5000, 200, 3, seed=7)  # 2 n m d = 1.2e10 >= FUSED_MIN_FLOPS
    ref = kernel_matvec(GaussianKernel(20.0), X, Z, V)
    with using(get_backend("cuda")):
        got = kernel_matvec(GaussianKernel(20.0), X, Z, V)
    assert calls == [1]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@compiled
def test_gpu_fused_products_stay_within_max_memory(monkeypatch):
    monkeypatch.setattr(tb, "FUSED_PRODUCTS", True)
    monkeypatch.setattr(tb, "FUSED_MIN_FLOPS", 0)
    backend = get_backend("cuda")
    rng = np.random.default_rng(5)
    X, V = rng.normal(size=(20000, 10)).astype(np.float32), rng.normal(size=(20000, 1)).astype(np.float32)
    budget = 64 * 2**20
    fused.fused_matvec(GaussianKernel(3.0), *tensors(X[:300], X[:300], V[:300], device="cuda"))  # compiled first
    calls = []
    original = fused.fused_matvec
    monkeypatch.setattr(fused, "fused_matvec", lambda *a, **k: calls.append(1) or original(*a, **k))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    with using(backend):
        got = KernelOperator(GaussianKernel(3.0), X, budget).matvec(V)
    torch.cuda.synchronize()
    used = torch.cuda.max_memory_allocated() - start
    assert used <= budget, f"{used} bytes held at the peak, over max_memory={budget}"
    assert len(calls) >= 1
    ref = KernelOperator(GaussianKernel(3.0), X).matvec(V, rows=np.arange(500))  # numpy, on 500 rows
    np.testing.assert_allclose(got[:500], ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
