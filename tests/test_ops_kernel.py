"""The kernel compute layer: equal to dense products, and never above the memory budget."""


import subprocess
import sys

import numpy as np
import pytest

from kernelscale.ops import kernel as ops_kernel
from kernelscale.ops import memory
from kernelscale.kernels import GaussianKernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel
from memcheck import peak_bytes

KERNELS = [GaussianKernel(1.5), LaplacianKernel(3.0), MaternKernel(1.5, 2.5), PolynomialKernel(2, 0.3, 1.0), LinearKernel()]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(97, 6)), rng.normal(size=(61, 6)), rng.normal(size=(61, 3))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("budget", [None, 300_000, 270_000])
def test_matvec_equals_dense_product(kernel, budget, data):
    X, Z, V = data
    dense = kernel(X, Z)
    np.testing.assert_allclose(ops_kernel.kernel_matvec(kernel, X, Z, V, max_memory=budget), dense @ V, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ops_kernel.kernel_matvec(kernel, X, Z, V[:, 0], max_memory=budget), dense @ V[:, 0], rtol=1e-10, atol=1e-10)


def test_host_products_keep_their_blocks_within_the_cache_and_equal_dense(monkeypatch):
    """Against 5000 points a host product's blocks hold CACHE_BLOCK_BYTES // (5000 x 8) = 209 rows
    (not the budget's 500), through the module function and the operator; the result is the
    dense product. Against 20000 points that would be 52 rows, below CACHE_BLOCK_MIN_ROWS: the
    budget's blocks are kept."""
    rng = np.random.default_rng(3)
    X, V = rng.normal(size=(500, 4)), rng.normal(size=(5000, 2))
    Z, kernel = rng.normal(size=(5000, 4)), GaussianKernel(2.0)
    steps = []
    blocks = ops_kernel._blocks

    def recording(*args, **kwargs):
        for start, stop, block in blocks(*args, **kwargs):
            steps.append(stop - start)
            yield start, stop, block

    monkeypatch.setattr(ops_kernel, "_blocks", recording)
    rows = ops_kernel.CACHE_BLOCK_BYTES // (5000 * 8)
    for product in (lambda: ops_kernel.kernel_matvec(kernel, X, Z, V, max_memory="1GB"),
                    lambda: ops_kernel.KernelOperator(kernel, Z, "1GB").predict(X, V)):
        steps.clear()
        np.testing.assert_allclose(product(), kernel(X, Z) @ V, rtol=1e-10, atol=1e-10)
        assert steps == [rows, rows, 500 - 2 * rows]
    wide = rng.normal(size=(20000, 4))
    steps.clear()
    ops_kernel.kernel_matvec(kernel, X, wide, np.ones(20000), max_memory="1GB")
    assert steps == [500]


def test_matvec_with_z_none_is_symmetric_product(data):
    X, _, _ = data
    v = np.arange(len(X), dtype=float)
    np.testing.assert_allclose(ops_kernel.kernel_matvec("linear", X, None, v, max_memory=275_000), X @ (X.T @ v), rtol=1e-10)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("budget", [300_000, 400_000, 1_000_000])
def test_matvec_stays_within_budget(kernel, budget):
    rng = np.random.default_rng(1)
    X, Z, V = rng.normal(size=(400, 8)), rng.normal(size=(300, 8)), rng.normal(size=(300, 2))
    peak, out = peak_bytes(lambda: ops_kernel.kernel_matvec(kernel, X, Z, V, max_memory=budget))
    slack = 4096  # small bookkeeping objects (slices, generator frames)
    assert peak <= budget + out.nbytes + slack, f"peak {peak} over budget {budget} + output {out.nbytes}"
    assert ops_kernel.matvec_memory(kernel, 400, 300, 8, max_memory=budget) <= budget


def test_float32_blocks_stay_within_budget_and_dtype():
    rng = np.random.default_rng(2)
    X, Z = rng.normal(size=(300, 5)).astype(np.float32), rng.normal(size=(200, 5)).astype(np.float32)
    v = rng.normal(size=200).astype(np.float32)
    for kernel in KERNELS:
        peak, out = peak_bytes(lambda: ops_kernel.kernel_matvec(kernel, X, Z, v, max_memory=280_000))
        assert out.dtype == np.float32
        assert peak <= 280_000 + out.nbytes + 4096
        np.testing.assert_allclose(out, kernel(X, Z).astype(np.float64) @ v, rtol=1e-3, atol=1e-3)
    # a float64 right-hand side promotes the whole product to float64
    assert ops_kernel.kernel_matvec(KERNELS[0], X, Z, v.astype(np.float64)).dtype == np.float64


def test_budget_below_one_row_names_the_fix():
    X = np.ones((10, 3))
    with pytest.raises(ValueError, match=r"max_memory=.*too small for one row.*increase max_memory"):
        ops_kernel.kernel_matvec(GaussianKernel(1.0), X, X, np.ones(10), max_memory=100)


def test_kernel_rows_match_dense_rows(data):
    X, Z, _ = data
    rows = np.array([5, 0, 96, 5, 40])
    for kernel in KERNELS:
        np.testing.assert_allclose(ops_kernel.kernel_rows(kernel, X, rows, Z, max_memory=270_000), kernel(X, Z)[rows], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ops_kernel.kernel_rows(kernel, X, rows), kernel(X, X)[rows], rtol=1e-12, atol=1e-12)
    assert ops_kernel.kernel_rows(KERNELS[0], X, np.array([], dtype=int)).shape == (0, len(X))


def test_kernel_rows_within_budget():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 10))
    rows = np.arange(0, 500, 5)
    peak, out = peak_bytes(lambda: ops_kernel.kernel_rows(GaussianKernel(2.0), X, rows, max_memory=800_000))
    assert peak <= 800_000 + 4096
    with pytest.raises(ValueError, match="fewer rows"):
        ops_kernel.kernel_rows(GaussianKernel(2.0), X, rows, max_memory=300_000)


def test_kernel_rows_rejects_bad_indices(data):
    X = data[0]
    with pytest.raises(ValueError, match="rows"):
        ops_kernel.kernel_rows("linear", X, np.array([0, 97]))
    with pytest.raises(ValueError, match="rows"):
        ops_kernel.kernel_rows("linear", X, np.array([0.5]))


def test_kernel_matrix_refuses_when_it_does_not_fit(data):
    X = data[0]
    np.testing.assert_allclose(ops_kernel.kernel_matrix(LinearKernel(), X), X @ X.T, rtol=1e-12)
    with pytest.raises(ValueError, match="max_memory"):
        ops_kernel.kernel_matrix(LinearKernel(), X, max_memory=len(X) ** 2 * 8 - 1)


def test_kernel_diag(data):
    X = data[0]
    for kernel in KERNELS:
        np.testing.assert_allclose(ops_kernel.kernel_diag(kernel, X), np.diag(kernel(X)), rtol=1e-7)


def test_iter_kernel_blocks_cover_all_rows(data):
    X, Z, _ = data
    seen = np.zeros(len(X), dtype=int)
    for start, stop, block in ops_kernel.iter_kernel_blocks("linear", X, Z, max_memory=270_000):
        assert block.nbytes <= 270_000 - memory.ufunc_workspace_bytes()
        np.testing.assert_allclose(block, X[start:stop] @ Z.T, rtol=1e-12)
        seen[start:stop] += 1
    np.testing.assert_array_equal(seen, 1)


@pytest.mark.parametrize(
    "given, expected",
    [(1000, 1000), (2.5e3, 2500), ("2GB", 2 * 10**9), ("512MiB", 512 * 2**20), ("1.5 gib", int(1.5 * 2**30)),
     ("300kb", 300_000), ("64", 64), ("1e6", 10**6)],
)
def test_parse_memory(given, expected):
    assert memory.parse_memory(given) == expected


@pytest.mark.parametrize("given", ["lots", "2 parsecs", "-1GB", 0, -5, float("nan")])
def test_parse_memory_rejects(given):
    with pytest.raises(ValueError, match="max_memory"):
        memory.parse_memory(given)


def test_parse_memory_type_error():
    with pytest.raises(TypeError, match="max_memory"):
        memory.parse_memory([1])


def test_default_budget_is_a_fraction_of_available_memory():
    assert 0 < memory.default_memory_budget() <= memory.available_memory()
    assert memory.parse_memory(None) == pytest.approx(memory.default_memory_budget(), rel=0.05)


def test_bad_inputs_are_named(data):
    X, Z, V = data
    with pytest.raises(ValueError, match="V must have shape"):
        ops_kernel.kernel_matvec("linear", X, Z, V[:10])
    with pytest.raises(ValueError, match="Z has 5 features"):
        ops_kernel.kernel_matvec("linear", X, Z[:, :5], V)
    with pytest.raises(ValueError, match="NaN"):
        ops_kernel.kernel_matvec("linear", X, Z, np.full(61, np.nan))


def test_blocks_are_capped_even_under_a_large_budget(data, monkeypatch):
    X, Z, V = data
    monkeypatch.setattr(ops_kernel, "MAX_BLOCK_BYTES", 2_000)
    sizes = [block.nbytes for _, _, block in ops_kernel.iter_kernel_blocks("linear", X, Z, max_memory="1GB")]
    assert len(sizes) > 1 and max(sizes) <= 2_000
    np.testing.assert_allclose(ops_kernel.kernel_matvec("linear", X, Z, V, max_memory="1GB"), X @ (Z.T @ V), rtol=1e-10)


# ----------------------------------------------------------------------------------------------
# KernelOperator: every verb against its dense definition, under small budgets


from kernelscale.ops.kernel import KernelOperator  # noqa: E402

# every test runs on each backend of conftest.BACKENDS (numpy, torch CPU)
pytestmark = pytest.mark.usefixtures("ops_backend")


@pytest.fixture
def op_data():
    rng = np.random.default_rng(7)
    return rng.normal(size=(120, 5)), rng.normal(size=(120, 3))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("budget", [None, 400_000])
def test_operator_verbs_equal_dense_definitions(kernel, budget, op_data):
    X, V = op_data
    K = kernel(X)
    op = KernelOperator(kernel, X, budget)
    rows, cols = np.array([3, 0, 77, 119]), np.array([5, 9, 100])
    np.testing.assert_allclose(op.matvec(V), K @ V, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(op.matvec(V[:, 0]), K @ V[:, 0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(op.matvec(V[cols], rows=rows, cols=cols), K[np.ix_(rows, cols)] @ V[cols], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(op.rows(rows), K[rows], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.diag(), np.diag(K), rtol=1e-7)
    blocks_seen = np.vstack([b.copy() for _, _, b in op.blocks(rows)])
    np.testing.assert_allclose(blocks_seen, K[rows], rtol=1e-12, atol=1e-12)
    Zt = np.random.default_rng(8).normal(size=(33, 5))
    np.testing.assert_allclose(op.predict(Zt, V), kernel(Zt, X) @ V, rtol=1e-10, atol=1e-10)


def test_row_block_products_equal_dense(op_data):
    X, V = op_data
    kernel = GaussianKernel(1.5)
    K = kernel(X)
    idx = np.array([4, 50, 2, 119])
    d = np.linspace(0.5, 2.0, len(X))
    M = K[idx].copy()
    M[np.arange(idx.size), idx] += d[idx]
    block = KernelOperator(kernel, X, 400_000).row_block(idx, diag=d)
    np.testing.assert_allclose(block.gram(), M @ M.T, rtol=1e-12)
    np.testing.assert_allclose(block.dot(V), M @ V, rtol=1e-12)
    np.testing.assert_allclose(block.tdot(V[: idx.size]), M.T @ V[: idx.size], rtol=1e-12)
    np.testing.assert_allclose(block.columns(idx), M[:, idx], rtol=1e-12)
    np.testing.assert_allclose(block.row_sums(), M.sum(axis=1), rtol=1e-12)
    # M^T V as (V^T M)^T: one column, a vector, and a view of a larger array to fill
    np.testing.assert_allclose(block.tdot(V[: idx.size, :1]), M.T @ V[: idx.size, :1], rtol=1e-12)
    np.testing.assert_allclose(block.tdot(V[: idx.size, 0]), M.T @ V[: idx.size, 0], rtol=1e-12)
    assert block.tdot(V[: idx.size]).flags.c_contiguous
    out = np.full((len(X) + 1, V.shape[1]), np.nan)
    assert np.shares_memory(block.tdot(V[: idx.size], out=out[1:]), out)
    np.testing.assert_allclose(out[1:], M.T @ V[: idx.size], rtol=1e-12)
    assert np.isnan(out[0]).all()  # nothing written outside the view


_TDOT_RESIDENT = """
import ctypes, numpy as np
from kernelscale.kernels import GaussianKernel
from kernelscale.ops.kernel import RowBlock
from kernelscale.ops.backend import NUMPY
from kernelscale.ops.memory import resident_bytes
rng = np.random.default_rng(0)
block = RowBlock(rng.random((1000, 20000)), NUMPY)
V = rng.normal(size=(1000, 8))
ctypes.CDLL(None).malloc_trim(0)
before = resident_bytes()
for _ in range(3):
    result = block.tdot(V)
del result
ctypes.CDLL(None).malloc_trim(0)
print(resident_bytes() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm and glibc's malloc_trim")
def test_row_block_transposed_product_keeps_nothing_resident():
    """M^T V on a tall block leaves the resident set where it was, in a fresh process: the
    threaded GEMM with the transposed block as its left operand kept ~60 MiB of BLAS buffers
    resident (2 threads), counted by no plan (the LS-SVM's first fit went 34% over max_memory)."""
    done = subprocess.run([sys.executable, "-c", _TDOT_RESIDENT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    grown = int(done.stdout.split()[-1])
    assert grown < 16 * 2**20, f"M^T V left {grown / 2**20:.1f} MiB resident"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_gram_equals_dense(dtype, op_data, monkeypatch):
    X, Y = op_data
    X = X.astype(dtype)
    kernel = MaternKernel(1.5, 1.5)
    cand = np.array([7, 1, 60, 99, 23])
    scale = np.linspace(0.5, 1.5, cand.size)
    w = np.linspace(0.1, 2.0, len(X))
    C = kernel(X.astype(np.float64))[:, cand] * scale * w[:, None]
    for cap in (None, 1_000):  # the small cap forces several row blocks
        if cap:
            monkeypatch.setattr(ops_kernel, "MAX_BLOCK_BYTES", cap)
        Q, R = KernelOperator(kernel, X).column_gram(cand, Y, scale=scale, weights=w)
        assert Q.dtype == R.dtype == np.float64
        np.testing.assert_allclose(Q, C.T @ C, rtol=1e-10)
        np.testing.assert_allclose(R, C.T @ Y, rtol=1e-10, atol=1e-12)


def test_operator_validates_x_once_and_verbs_never_again(op_data, monkeypatch):
    from kernelscale.ops import kernel as module

    X, V = op_data
    calls = []
    original = module.as_float_array
    monkeypatch.setattr(module, "as_float_array", lambda *a, **k: calls.append(k) or original(*a, **k))
    op = KernelOperator(GaussianKernel(1.0), X, 1_000_000)
    assert len(calls) == 1
    op.rows(np.array([1, 2]))
    op.matvec(V)
    op.matvec(V[:4], cols=np.arange(4))
    op.column_gram(np.array([0, 3]), V)
    op.row_block(np.array([5]))
    assert len(calls) == 1  # the verbs do not re-run the finiteness pass over X


@pytest.mark.parametrize("budget", [350_000, 600_000])
def test_operator_verbs_stay_within_budget(budget):
    rng = np.random.default_rng(9)
    X, V = rng.normal(size=(400, 6)), rng.normal(size=(400, 2))
    kernel = GaussianKernel(2.0)
    op = KernelOperator(kernel, X, budget)
    op.prepared  # noqa: B018  (held by the operator, counted in its budget)
    slack = 4096
    peak, out = peak_bytes(lambda: op.matvec(V))
    assert peak <= budget + out.nbytes + slack
    peak, out = peak_bytes(lambda: op.matvec(V[:50], rows=np.arange(300), cols=np.arange(50)))
    assert peak <= budget + out.nbytes + slack
    peak, (Q, R) = peak_bytes(lambda: op.column_gram(np.arange(20), V))
    assert peak <= budget + slack
    peak, out = peak_bytes(lambda: op.rows(np.arange(10)))
    assert peak <= budget + slack


def test_operator_budget_too_small_names_max_memory(op_data):
    X, V = op_data
    op = KernelOperator(GaussianKernel(1.0), X, 2_000)
    with pytest.raises(ValueError, match="max_memory=.*too small"):
        op.matvec(V)
    with pytest.raises(ValueError, match="max_memory=.*too small"):
        op.rows(np.arange(50))
    with pytest.raises(ValueError, match="rows must index"):
        KernelOperator(GaussianKernel(1.0), X).rows(np.array([500]))


@pytest.mark.parametrize("dtypes", [(np.float64, np.float64), (np.float32, np.float32), (np.float32, np.float64)])
def test_numpy_matmul_in_row_slices_equals_one_product(dtypes):
    """Products of more than GEMM_ROWS rows run in slices (OpenBLAS keeps buffers resident that
    grow with the rows of one call): the same values, dtype and output buffer as one product."""
    from kernelscale.ops.backend import GEMM_ROWS, NUMPY

    rng = np.random.default_rng(0)
    a = rng.normal(size=(2 * GEMM_ROWS + 7, 33)).astype(dtypes[0])
    b = rng.normal(size=(33, 5)).astype(dtypes[1])
    whole = np.matmul(a, b)
    got = NUMPY.matmul(a, b)
    assert got.dtype == whole.dtype and got.shape == whole.shape
    np.testing.assert_allclose(got, whole, rtol=1e-5 if whole.dtype == np.float32 else 1e-12)
    out = np.empty_like(whole)
    assert NUMPY.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, whole, rtol=1e-5 if whole.dtype == np.float32 else 1e-12)
