"""The torch backend (kernelscale.ops.torch_backend) against numpy, on torch's CPU kernels.

Every estimator of the shared list gives the same predictions with ``device="cpu"`` as with
numpy: to 1e-10 relative in float64. In float32 the goal is 1e-6 relative; iterative solvers
carry float32 rounding (summation order differs between the two BLAS) through many steps, so
there the two backends must agree at least as well as float32 agrees with float64 on the same
problem (within 4 times their float32-float64 difference). Tensors in give tensors out, on the input's device. Tests marked ``gpu`` run where
torch sees a CUDA GPU.
"""

import warnings

import numpy as np
import pytest
from estimator_list import ESTIMATORS
from sklearn.base import clone, is_classifier, is_regressor

torch = pytest.importorskip("torch")

from kernelscale import GaussianKernel, SLKLRegressor  # noqa: E402
from kernelscale.base.boundary import BoundaryMixin  # noqa: E402
from kernelscale.ops import KernelOperator, kernel_matvec  # noqa: E402
from kernelscale.ops.backend import NUMPY, current_backend, get_backend, using  # noqa: E402
from kernelscale.ops.torch_backend import TorchBackend  # noqa: E402

METHODS = ("predict", "decision_function", "predict_proba", "transform")
CUDA = torch.cuda.is_available()


def gpu(test):
    """Marked ``gpu`` (pyproject.toml) and run only where torch sees a CUDA GPU."""
    return pytest.mark.gpu(pytest.mark.skipif(not CUDA, reason="no CUDA GPU visible to torch")(test))


def _id(est):
    params = est.get_params(deep=False)
    tag = params.get("solver") or params.get("loss") or params.get("update") or ""
    return f"{type(est).__name__}-{tag}" if tag else type(est).__name__


WITH_DEVICE = [pytest.param(e, id=_id(e)) for e in ESTIMATORS if "device" in e.get_params(deep=False)]


def _data(est, dtype, n=120, d=4):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(dtype)
    if is_classifier(est):
        return X, np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5])
    if is_regressor(est):
        return X, np.sin(X[:, 0]) + 0.1 * X[:, 1]
    return X, None


def _outputs(est, X, y, device):
    est = clone(est).set_params(device=device)
    if est.get_params(deep=False).get("random_state", 0) is None:
        est.set_params(random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y) if y is not None else est.fit(X)
    return {m: np.asarray(getattr(est, m)(X), dtype=np.float64) for m in METHODS if hasattr(est, m)}


def _relative(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30))


def test_every_estimator_but_the_data_transforms_takes_device():
    from kernelscale.registry import ESTIMATORS as REGISTRY

    missing = [e.name for e in REGISTRY if "device" not in e.cls().get_params()]
    assert not missing, f"estimators without device=: {missing}"


@pytest.mark.parametrize("estimator", WITH_DEVICE)
def test_float64_predictions_equal_numpy(estimator):
    X, y = _data(estimator, np.float64)
    ref, got = _outputs(estimator, X, y, None), _outputs(estimator, X, y, "cpu")
    for method in ref:
        # an estimator that computes in float32 whatever the input is held to the float32 goal
        tol = 1e-6 if estimator.get_params(deep=False).get("dtype") == np.float32 else 1e-10
        if type(estimator).__name__ == "CalibratedLeastSquaresClassifier":
            tol = 1e-9  # ten calibrations on y, y^2, y^3 with a small ridge amplify the products' rounding
        assert _relative(ref[method], got[method]) <= tol, method


@pytest.mark.parametrize("estimator", WITH_DEVICE)
def test_float32_predictions_equal_numpy_to_float32_rounding(estimator):
    X, y = _data(estimator, np.float32)
    ref, got = _outputs(estimator, X, y, None), _outputs(estimator, X, y, "cpu")
    ref64 = _outputs(estimator, X.astype(np.float64), y, None)
    for method in ref:
        spread = _relative(ref64[method], ref[method])  # what float32 rounding does to this fit
        assert _relative(ref[method], got[method]) <= max(1e-6, 4 * spread), method


def test_a_tensor_selects_its_device_and_comes_back_as_a_tensor():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(80, 3)), rng.normal(size=80)
    est = SLKLRegressor(GaussianKernel(1.0), n_components=20, random_state=0)
    expected = clone(est).fit(X, y).predict(X)
    seen = []
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)

    class Spy(TorchBackend):
        def matmul(self, a, b, out=None):
            seen.append(True)
            return super().matmul(a, b, out=out)

    got = clone(est).set_params(device=Spy("cpu")).fit(Xt, yt).predict(Xt)
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    assert seen, "the tensor's fit did not run on the torch backend"
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-12)
    # device=None and a tensor: the tensor's device (torch), numpy arrays back only for numpy input
    fitted = clone(est).fit(Xt, yt)
    assert isinstance(fitted.predict(Xt), torch.Tensor)
    assert isinstance(fitted.predict(X), np.ndarray)


def test_the_backend_in_use_is_restored_after_a_call():
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    SLKLRegressor(n_components=10, device="cpu", random_state=0).fit(X, y)
    assert current_backend() is NUMPY


@pytest.mark.parametrize(
    "device, error, match",
    [
        ("tpu", ValueError, "device='tpu'"),
        ("cuda:7" if CUDA else "cuda", ValueError, "device='cuda"),
        (3, TypeError, "device must be"),
    ],
)
def test_bad_devices_are_named(device, error, match):
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(30, 2)), rng.normal(size=30)
    with pytest.raises(error, match=match):
        SLKLRegressor(n_components=5, device=device).fit(X, y)


def test_auto_is_numpy_without_a_gpu():
    assert (get_backend("auto") is NUMPY) == (not CUDA)


class _Recorder(BoundaryMixin):
    device = None

    def fit(self, X, y=None):
        self.dtype_seen_, self.backend_seen_ = X.dtype, current_backend()
        return self


def test_the_dtype_follows_the_input_on_a_cuda_device_too(monkeypatch):
    """dtype=None follows the input everywhere (docs/gpus.md): no silent float32 on CUDA."""
    import types

    cuda_like = TorchBackend("cpu")
    cuda_like.device = types.SimpleNamespace(type="cuda")  # only the device type is read
    monkeypatch.setattr("kernelscale.base.device.get_backend", lambda device: cuda_like if device == "cuda" else NUMPY)
    est = _Recorder()
    est.device = "cuda"
    for dtype in (np.float64, np.float32):
        assert est.fit(np.ones((4, 2), dtype=dtype)).dtype_seen_ == dtype
    assert est.backend_seen_ is cuda_like


def test_default_budget_follows_the_backend_memory(monkeypatch):
    from kernelscale.ops import memory

    small = TorchBackend("cpu")
    monkeypatch.setattr(TorchBackend, "available_memory", lambda self: 10 * 2**20)
    with using(small):
        assert memory.parse_memory(None) == int(memory.DEFAULT_MEMORY_FRACTION * 10 * 2**20)


@gpu
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_gpu_matvec_equals_numpy(dtype, rtol):
    rng = np.random.default_rng(4)
    X, V = rng.normal(size=(3000, 20)).astype(dtype), rng.normal(size=(3000, 3)).astype(dtype)
    ref = kernel_matvec(GaussianKernel(3.0), X, None, V)
    with using(get_backend("cuda")):
        got = kernel_matvec(GaussianKernel(3.0), X, None, V)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


@gpu
def test_gpu_blocks_stay_within_max_memory():
    backend = get_backend("cuda")
    rng = np.random.default_rng(5)
    X, V = rng.normal(size=(20000, 10)).astype(np.float32), rng.normal(size=(20000, 1)).astype(np.float32)
    budget = 64 * 2**20  # a 20000 x 20000 float32 block would be 1.6 GB
    warm = torch.ones((64, 64), device=backend.device)
    warm @ warm  # cuBLAS's workspace, allocated at a first product, is held before the count starts
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    with using(backend):
        KernelOperator(GaussianKernel(3.0), X, budget).matvec(V)
    torch.cuda.synchronize()
    used = torch.cuda.max_memory_allocated() - start
    assert used <= budget, f"{used} bytes held at the peak, over max_memory={budget}"


def test_gpu_benchmark_records_the_device_and_the_ratio_to_torch_gemm(tmp_path):
    import json
    import pathlib

    from benchmarks.perf import gpu as module

    path = module.run(quick=True, out_dir=tmp_path, device="cpu", n=300, repeats=1)
    records = json.loads(pathlib.Path(path).read_text())["records"]
    ours = [r for r in records if r["role"] == "ours"]
    assert len(ours) == 2 and all("torch CPU" in r["params"]["device"] for r in ours)
    assert all(r["ratio_to_peer"]["gflops"] > 0 for r in ours)


@pytest.fixture
def keep_on_torch_cpu(monkeypatch):
    """Kept blocks (doubly_stochastic module docstring, "Streaming on a GPU") on torch's CPU
    kernels too, where they are off by default, so that these tests run without a GPU."""
    import kernelscale.doubly_stochastic.fitting as dsg

    monkeypatch.setattr(dsg, "_KEEP_ON_DEVICES", frozenset({"cuda", "cpu"}))


def _stream(device, chunks=6, solver="preconditioned", **params):
    """12 iterations of blocks of 1024 features (groups of 4 blocks) over 6 partial_fit calls."""
    from kernelscale import DoublyStochasticClassifier

    rng = np.random.default_rng(6)
    X = rng.random((chunks * 512, 12)).astype(np.float32)
    y = np.digitize(X[:, 0] + X[:, 1], [0.8, 1.2])
    model = DoublyStochasticClassifier(loss="softmax", solver=solver, block_size=1024, batch_size=256,
                                       t0=4, random_state=0, device=device, **params)
    for s in range(0, len(y), 512):
        model.partial_fit(X[s : s + 512], y[s : s + 512], classes=[0, 1, 2])
    return model, X


def test_a_device_stream_draws_each_block_once_and_equals_redrawing(monkeypatch, tmp_path):
    """partial_fit on a GPU keeps the drawn blocks between calls (doubly_stochastic module
    docstring, "Streaming on a GPU"; here on torch CPU): the same coefficients bit for bit as
    redrawing every block at every call, with each block drawn once; save and pickle drop them."""
    import pickle

    import kernelscale.doubly_stochastic.fitting as dsg
    from kernelscale import load, save
    from kernelscale.ops.feature_blocks import FeatureBlockSpec

    draws = []
    real = FeatureBlockSpec.block
    monkeypatch.setattr(FeatureBlockSpec, "block", lambda spec, t: draws.append(t) or real(spec, t))
    redrawn, X = _stream("cpu")  # torch CPU keeps nothing by default
    redrawn_draws, draws[:] = list(draws), []
    assert "_device_ops" not in vars(redrawn)
    monkeypatch.setattr(dsg, "_KEEP_ON_DEVICES", frozenset({"cpu"}))
    kept, _ = _stream("cpu")
    assert kept.n_iter_ == redrawn.n_iter_ == 12
    np.testing.assert_array_equal(kept.coef_, redrawn.coef_)
    # kept: every block drawn once (its group filled as it grew); redrawn: each call draws all earlier blocks
    assert sorted(draws) == list(range(12))
    assert len(redrawn_draws) > 3 * len(draws)
    # groups 0-3 and 4-7 moved to the device once complete; 8-11, drawn up to the last block, stay on the host
    assert [g.device is not None for g in kept._device_ops[True]._cache.values()] == [True, True, False]
    np.testing.assert_array_equal(kept.predict_proba(X), redrawn.predict_proba(X))  # kept for predictions too
    assert set(kept._device_ops) == {True, False}
    state = pickle.loads(pickle.dumps(kept))
    assert "_device_ops" not in vars(state) and "_device_ops" in vars(kept)  # pickling leaves the model alone
    save(kept, tmp_path / "m.ks")
    assert "_device_ops" not in vars(load(tmp_path / "m.ks"))


def test_a_stream_on_numpy_keeps_nothing_between_calls(keep_on_torch_cpu):
    model, _ = _stream(None, chunks=2)
    assert "_device_ops" not in vars(model)


def test_a_fresh_fit_drops_the_kept_blocks(keep_on_torch_cpu):
    model, X = _stream("cpu", chunks=2)
    assert "_device_ops" in vars(model)
    model.fit(X, np.arange(len(X)) % 3)
    assert "_device_ops" not in vars(model)


def test_the_kept_blocks_of_fits_and_predictions_share_the_budget(keep_on_torch_cpu):
    """Each call counts what the other kept operator holds, first cut to a quarter of its budget
    (the latest blocks dropped): together they stay within max_memory."""
    budget = 8 * 2**20  # 48 blocks of 12 x 1024 float32 frequencies: 2.4 MiB
    model, X = _stream("cpu", chunks=24, solver="sgd", max_memory=budget)
    fit_op = model._device_ops[True]
    before = fit_op._used
    assert before > budget // 4
    model.predict(X[:100])
    predict_op = model._device_ops[False]
    assert fit_op._used <= budget // 4 < before and predict_op._used > budget // 4
    assert fit_op._used + predict_op._used <= budget
    model.partial_fit(X[:512], np.arange(512) % 3)
    assert predict_op._used <= budget // 4 and fit_op._used + predict_op._used <= budget


def test_group_scores_on_the_device_equal_the_host_draws():
    """Complete cached groups held on the device give the scores of groups drawn per call, and a
    block of a moved group read back on the host is the drawn one."""
    from kernelscale.ops.feature_blocks import FeatureBlockSpec
    from kernelscale.ops.features import FeatureOperator

    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 6))
    spec = FeatureBlockSpec(GaussianKernel(2.0), 6, 512, 3)
    coef = rng.normal(size=(20, 512, 2))
    backend = get_backend("cpu")
    cached = FeatureOperator(spec, 2**30, cache_bytes=2**30, backend=backend)
    first = cached.scores(X, coef, range(20))
    second = cached.scores(X, coef, range(20))  # from the groups now on the device
    fresh = FeatureOperator(spec, 2**30, backend=backend).scores(X, coef, range(20))
    np.testing.assert_array_equal(first, fresh)
    np.testing.assert_array_equal(second, fresh)
    # groups of 8 blocks: the two complete ones moved, the third (blocks 16-19 of 16-23) stays on the host
    assert [g.device is backend for g in cached._cache.values()] == [True, True, False]
    np.testing.assert_array_equal(cached.block(9).weights, spec.block(9).weights)


@gpu
def test_a_gpu_stream_keeps_its_blocks_on_the_gpu_and_agrees_with_torch_cpu():
    on_gpu, X = _stream("cuda", solver="sgd")
    on_cpu, _ = _stream("cpu", solver="sgd")
    assert "_device_ops" not in vars(on_cpu)  # kept on CUDA devices only
    moved = [g for g in on_gpu._device_ops[True]._cache.values() if g.device is not None]
    assert len(moved) == 2 and all(g.weights_t.device.type == "cuda" for g in moved)
    # float32 on two devices: the same model up to rounding carried through 12 sgd iterations
    # (sgd: no ill-conditioned solve of a 1024 x 1024 covariance from 256 rows to amplify it)
    assert np.linalg.norm(on_gpu.coef_ - on_cpu.coef_) <= 1e-3 * np.linalg.norm(on_cpu.coef_)
    assert np.mean(on_gpu.predict(X) == on_cpu.predict(X)) > 0.99


def test_device_predictions_draw_the_blocks_once_and_equal_drawing_them_each_time(monkeypatch, keep_on_torch_cpu):
    from kernelscale import DoublyStochasticClassifier
    from kernelscale.ops.feature_blocks import FeatureBlockSpec

    rng = np.random.default_rng(8)
    X = rng.normal(size=(600, 5))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    model = DoublyStochasticClassifier(solver="sgd", n_iter=6, block_size=64, batch_size=100, random_state=0)
    model.fit(X, y)
    drawn = model.set_params(device="cpu").decision_function(X)  # no kept blocks yet: drawn, then kept
    draws = []
    real = FeatureBlockSpec.block
    monkeypatch.setattr(FeatureBlockSpec, "block", lambda spec, t: draws.append(t) or real(spec, t))
    kept = model.decision_function(X)
    assert draws == []  # every block from the device
    np.testing.assert_array_equal(kept, drawn)
    model.__dict__.pop("_device_ops")
    np.testing.assert_array_equal(model.decision_function(X), drawn)  # drawn again: the same values
    assert sorted(draws) == list(range(6))


def test_padded_augmented_operands_give_the_same_kernel_products(monkeypatch):
    """On a CUDA device the distance kernels' augmented operands are padded with zero columns
    to a multiple of 8 (cuBLAS alignment); here padded on torch CPU: the same products as numpy,
    and the memory estimates count the padding."""
    import kernelscale.kernels as kernels_module
    from kernelscale import MaternKernel
    from kernelscale.ops import kernel_matrix

    monkeypatch.setattr(kernels_module, "_PAD_ON_DEVICES", frozenset({"cuda", "cpu"}))
    rng = np.random.default_rng(9)
    X, Z = rng.normal(size=(50, 13)), rng.normal(size=(40, 13))
    kernels = (GaussianKernel(2.0), MaternKernel(2.0, nu=1.5))
    on_numpy = [kernel_matrix(kernel, X, Z) for kernel in kernels]
    with using(get_backend("cpu")):
        assert kernels_module._prepare_distances(torch.as_tensor(Z), 1.0).aux.shape == (40, 16)
        assert GaussianKernel(2.0).aux_bytes(40, 13, np.float64) == 40 * 16 * 8
        for kernel, want in zip(kernels, on_numpy):
            np.testing.assert_allclose(kernel_matrix(kernel, X, Z), want, rtol=1e-12, atol=1e-14)
    assert GaussianKernel(2.0).aux_bytes(40, 13, np.float64) == 40 * 15 * 8  # numpy: no padding


@pytest.mark.parametrize("solver", ["sgd", "preconditioned", "preconditioned-solved-on-device"])
def test_a_device_fit_takes_the_new_blocks_moments_where_its_features_are(solver, monkeypatch):
    """On a torch backend the new block's gradient and covariance are taken on the device
    (doubly_stochastic.solver._block_moments; only the D x k gradient crosses, and the D x D covariance
    where the ridge solve runs): the same iterates as numpy's host products, weighted rows
    included, in float64; "solved-on-device": the preconditioner's solve on the device too, as
    on a GPU at blocks of DEVICE_SOLVE_ORDER features."""
    from kernelscale import DoublyStochasticClassifier
    from kernelscale.doubly_stochastic import solver as dsg
    from kernelscale.ops import torch_backend

    factorised = []
    if solver.endswith("on-device"):
        solver = "preconditioned"
        monkeypatch.setattr(torch_backend, "DEVICE_SOLVE_TYPES", ("cpu", "cuda"))
        monkeypatch.setattr(torch_backend, "DEVICE_SOLVE_ORDER", 1)
        real_cholesky = torch.linalg.cholesky_ex
        monkeypatch.setattr(torch.linalg, "cholesky_ex", lambda A: factorised.append(A.shape) or real_cholesky(A))
    seen = []
    real = dsg._block_moments
    monkeypatch.setattr(dsg, "_block_moments", lambda be, Phi, *a: seen.append(type(Phi)) or real(be, Phi, *a))
    rng = np.random.default_rng(10)
    X = rng.normal(size=(900, 6))
    y = np.digitize(X[:, 0] - X[:, 1], [-0.5, 0.5])
    w = rng.uniform(0.5, 2.0, size=900)
    params = dict(solver=solver, n_iter=5, block_size=128, batch_size=300, random_state=0)
    on_numpy = DoublyStochasticClassifier(**params).fit(X, y, sample_weight=w)
    on_torch = DoublyStochasticClassifier(device="cpu", **params).fit(X, y, sample_weight=w)
    assert seen[:5] == [np.ndarray] * 5 and seen[5:] == [torch.Tensor] * 5
    assert factorised == ([] if not torch_backend.DEVICE_SOLVE_ORDER == 1 else [(128, 128)] * 5)
    np.testing.assert_allclose(on_torch.coef_, on_numpy.coef_, rtol=1e-9, atol=1e-12 * np.abs(on_numpy.coef_).max())


def test_a_ridge_solve_on_the_device_equals_the_hosts_and_grows_the_ridge_as_it_does(monkeypatch):
    """TorchBackend.ridge_solve on the device (as on a GPU at DEVICE_SOLVE_ORDER and more): the
    host's solution to 1e-10 for a positive definite C; for an indefinite one the same grown
    ridge, hence the same solution; NaN for a non-finite C."""
    from kernelscale.ops import torch_backend
    from kernelscale.ops.backend import ridge_solve

    monkeypatch.setattr(torch_backend, "DEVICE_SOLVE_TYPES", ("cpu", "cuda"))
    monkeypatch.setattr(torch_backend, "DEVICE_SOLVE_ORDER", 1)
    backend = TorchBackend("cpu")
    rng = np.random.default_rng(4)
    V = rng.normal(size=(40, 60))
    G = rng.normal(size=(40, 3))
    # definite; indefinite, where the grown ridge leaves a condition number of about 1e6
    for C, rtol in ((V @ V.T / 60, 1e-10), (V[:, :5] @ V[:, :5].T - 1e-6 * np.eye(40), 1e-6)):
        on_host = ridge_solve(C, G, 1e-9)
        Ct = torch.as_tensor(C.copy())
        on_device = backend.ridge_solve(Ct, G, 1e-9)
        assert isinstance(on_device, np.ndarray) and on_device.dtype == np.float64
        np.testing.assert_allclose(on_device, on_host, rtol=rtol, atol=rtol * np.abs(on_host).max())
        assert np.array_equal(Ct.numpy(), C)  # not overwritten unless asked
        np.testing.assert_array_equal(backend.ridge_solve(Ct, G, 1e-9, overwrite=True), on_device)
        assert not np.array_equal(Ct.numpy(), C)  # C was the work space
        Cn = C.copy()  # a numpy C, whose memory torch's CPU tensor would share
        np.testing.assert_array_equal(backend.ridge_solve(Cn, G, 1e-9), on_device)
        assert np.array_equal(Cn, C)
    C[0, 0] = np.nan
    assert np.isnan(backend.ridge_solve(torch.as_tensor(C), G, 1e-9)).all()


def test_a_partial_fit_after_predictions_has_the_room_it_needs(keep_on_torch_cpu):
    """The blocks kept for predictions are cut to what a partial_fit leaves spare, so a budget
    that fits the iterations keeps fitting them after a prediction."""
    from kernelscale.doubly_stochastic import dsg_memory

    model, X = _stream("cpu", chunks=8, solver="sgd")
    _, need = dsg_memory(256, model._spec(np.float32), 3, model.n_iter_ + 2, "sgd")
    model.set_params(max_memory=int(need / 0.8))
    model.predict(X)
    assert model._device_ops[False]._used > need // 4  # more than the partial_fit can spare
    model.partial_fit(X[:512], np.arange(512) % 3)
    assert model.n_iter_ == 18 and model._device_ops[False]._used <= need // 4 + 1


def test_kept_blocks_go_with_a_warm_start_fit_and_a_change_of_device(keep_on_torch_cpu):
    model, X = _stream("cpu", chunks=2)
    model.predict(X)
    assert set(model._device_ops) == {True, False}
    model.set_params(device=None).predict(X)  # numpy now: nothing kept on the old device
    assert "_device_ops" not in vars(model)
    model.set_params(device="cpu").partial_fit(X[:512], np.arange(512) % 3)
    assert "_device_ops" in vars(model)
    model.set_params(warm_start=True, n_iter=model.n_iter_ + 2).fit(X, np.arange(len(X)) % 3)
    assert "_device_ops" not in vars(model)


def test_the_prepared_points_count_their_copy_on_a_cuda_device():
    """X's copy on a CUDA device is memory the budget must hold (on the host, X in the
    computation dtype is used as it is); here a torch CPU backend that reports a CUDA device."""
    import types

    X = np.random.default_rng(11).normal(size=(500, 7)).astype(np.float32)
    host = KernelOperator(GaussianKernel(2.0), X, 2**26)
    cuda_like = TorchBackend("cpu")
    cuda_like.device = types.SimpleNamespace(type="cuda")  # only the device type is read
    on_cuda = KernelOperator(GaussianKernel(2.0), X, 2**26, backend=cuda_like)
    assert on_cuda.prepared_bytes == host.prepared_bytes + X.nbytes
