"""The conventions every estimator keeps (docs/conventions.md, "Shared vocabulary"), checked over the shared
estimator list: a new estimator gets every check by being listed in ``estimator_list.py``.

float32 in gives float32 out; ``class_weight="balanced"`` equals the matching sample weights;
``warm_start`` continues to ``n_iter`` (``n_stages``) in total; a callback returning True stops
the fit after the first iteration; ``verbose=1`` shows progress; a ``max_memory`` too small
fails before allocating and names the parameter; a fit stays within a small ``max_memory``.
Each check runs on numpy and on torch's CPU kernels (``device="cpu"``), the memory checks on
numpy only. Save/load round trips are in test_persistence.py, scikit-learn's checks in
test_estimator_checks.py.
"""

import tracemalloc
import warnings

import numpy as np
import pytest
from conftest import BACKENDS
from estimator_list import ESTIMATORS
from kernelscale.ops import fast_cos
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.utils.class_weight import compute_sample_weight

METHODS = ("predict", "decision_function", "predict_proba", "transform")
ITERATION_PARAMS = ("n_iter", "n_stages")


def _id(est):
    params = est.get_params(deep=False)
    tag = params.get("solver") or params.get("loss") or params.get("update") or ""
    return f"{type(est).__name__}-{tag}" if tag else type(est).__name__


def _data(est, n=120, d=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    if is_classifier(est):
        y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5])
    elif is_regressor(est):
        y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    else:
        y = None
    return X, y


def _fit(est, X, y, **kw):
    """Fit (a transformer also transforms X: its work over the rows is there)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if y is not None:
            return est.fit(X, y, **kw)
        est.fit(X, **kw).transform(X)
        return est


def _seeded(est):
    """A clone with random_state=0 where the estimator takes one (comparisons need equal draws)."""
    est = clone(est)
    if est.get_params(deep=False).get("random_state", 0) is None:
        est.set_params(random_state=0)
    return est


def _iterative(est):
    """False for the exact solvers: no iterations to stop, report or continue."""
    return not (type(est).__name__ == "ExactKernelRidge" or est.get_params(deep=False).get("solver") == "exact")


def _outputs(est, X):
    return {m: np.asarray(getattr(est, m)(X)) for m in METHODS if hasattr(est, m)}


def _on_devices(estimators, devices):
    """Each estimator on each device of ``devices`` that it takes (None: numpy; "cpu": torch)."""
    out = []
    for e in estimators:
        for device in devices:
            if device is None:
                out.append(pytest.param(e, id=_id(e)))
            elif "device" in e.get_params(deep=False):
                out.append(pytest.param(clone(e).set_params(device=device), id=f"{_id(e)}-torch"))
    return out


#: the backends of the conventions battery; the memory checks run on numpy only (tracemalloc
#: does not see torch's allocator; the GPU budget is checked in test_torch_backend.py)
DEVICES = [None] + [d for d in BACKENDS if d != "numpy"]


def _with(param, iterative=False, devices=DEVICES):
    chosen = [e for e in ESTIMATORS if param in e.get_params(deep=False) and (_iterative(e) or not iterative)]
    return _on_devices(chosen, devices)


ALL = _on_devices(ESTIMATORS, DEVICES)


@pytest.mark.parametrize("estimator", ALL)
def test_float32_in_float32_out(estimator):
    est = clone(estimator)
    X, y = _data(est, dtype=np.float32)
    _fit(est, X, y)
    for method, out in _outputs(est, X).items():
        if method != "predict" or is_regressor(est):
            assert out.dtype == np.float32, f"{method} returned {out.dtype} for float32 input"


@pytest.mark.parametrize("estimator", _with("class_weight"))
def test_balanced_class_weight_equals_sample_weight(estimator):
    X, y = _data(estimator)
    y = np.where(np.arange(y.size) % 5 == 0, 2, np.minimum(y, 1))  # imbalanced
    a = _fit(_seeded(estimator).set_params(class_weight="balanced"), X, y)
    b = _fit(_seeded(estimator).set_params(class_weight=None), X, y, sample_weight=compute_sample_weight("balanced", y))
    for method, out in _outputs(a, X).items():
        np.testing.assert_allclose(out, getattr(b, method)(X), rtol=1e-8, atol=1e-10, err_msg=method)


def _iteration_param(est):
    params = est.get_params(deep=False)
    return next((p for p in ITERATION_PARAMS if p in params), None)


@pytest.mark.parametrize("estimator", [p for p in _with("warm_start", True) if _iteration_param(p.values[0])])
def test_warm_start_continues_to_the_total(estimator):
    name = _iteration_param(estimator)
    X, y = _data(estimator)
    total = estimator.get_params()[name]
    half = max(1, total // 2)
    warm = _fit(clone(estimator).set_params(warm_start=True, **{name: half}), X, y)
    _fit(warm.set_params(**{name: total}), X, y)
    assert warm.n_iter_ == total, f"{name}={total} is the total a warm start reaches, got n_iter_={warm.n_iter_}"
    with pytest.raises(ValueError, match=name):
        _fit(warm.set_params(**{name: half}), X, y)


@pytest.mark.parametrize("estimator", _with("callback", True))
def test_callback_returning_true_stops_after_the_first_iteration(estimator):
    X, y = _data(estimator)
    seen = []

    def stop(info):
        seen.append(dict(info))
        return True

    est = _fit(clone(estimator).set_params(callback=stop), X, y)
    assert len(seen) == 1, f"the callback ran {len(seen)} times after asking to stop"
    assert {"iteration", "objective"} <= set(seen[0]), f"callback info keys {sorted(seen[0])}"
    assert _outputs(est, X)  # a stopped fit is a fitted model


@pytest.mark.parametrize("estimator", _with("verbose", True))
def test_verbose_shows_progress(estimator, capsys):
    X, y = _data(estimator)
    _fit(clone(estimator).set_params(verbose=1), X, y)
    captured = capsys.readouterr()
    assert captured.err or captured.out, "verbose=1 printed nothing"
    _fit(clone(estimator).set_params(verbose=0), X, y)
    captured = capsys.readouterr()
    assert not captured.err and not captured.out, "verbose=0 printed something"


@pytest.mark.parametrize("estimator", _with("max_memory", devices=[None]))
def test_too_small_max_memory_fails_before_allocating(estimator):
    X, y = _data(estimator, n=6000, d=5)
    est = clone(estimator).set_params(max_memory=2_000)
    with pytest.raises(ValueError):
        _fit(clone(est), X, y)  # imports and one-time set-up outside the trace
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="max_memory"):
            _fit(est, X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # an n x n matrix would be 288 MB; the median heuristic's 1000-point sample takes about 12 MB
    assert peak < 4 * X.nbytes + 40 * 2**20, f"allocated {peak} bytes before refusing (X is {X.nbytes})"


@pytest.mark.parametrize("estimator", _with("max_memory", devices=[None]))
def test_fit_stays_within_max_memory(estimator):
    n = 2000 if _iterative(estimator) else 600  # the exact solvers need n^2 (2.9 MB) by design
    X, y = _data(estimator, n=n, d=5)
    budget = 6 * 2**20  # a 2000 x 2000 float64 kernel matrix is 32 MB
    est = _seeded(estimator).set_params(max_memory=budget)
    for name in ("max_iter", "n_iter", "n_stages"):  # memory is reached in the first iterations
        if name in est.get_params(deep=False):
            value = est.get_params()[name]  # None or "auto": 5 as well
            est.set_params(**{name: min(value, 5) if isinstance(value, int) else 5})
    _fit(clone(est), *_data(estimator, n=200, d=5))  # imports and compilation outside the trace
    fast_cos.load()  # the 2000-row fit's cosines take the compiled kernel, the 200-row one's do not
    tracemalloc.start()
    try:
        _fit(est, X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= budget, f"peak {peak} bytes over max_memory={budget}"


def _keeps_history(est):
    """Every iterative estimator keeps objective_history_, except the transformers (one draw, no
    iterations), the Nystrom committee of LS-SVM (its members are not iterates: no residual) and
    the front door (its fitted best_estimator_ keeps the history of the method it chose)."""
    return (_iterative(est) and (is_classifier(est) or is_regressor(est))
            and "time_budget" not in est.get_params(deep=False)
            and est.get_params(deep=False).get("solver") != "nystrom")


@pytest.mark.parametrize("estimator", [p for p in ALL if _keeps_history(p.values[0])])
def test_histories_are_one_array_per_problem(estimator):
    X, y = _data(estimator)
    est = _fit(_seeded(estimator), X, y)
    hist = est.objective_history_
    arrays = hist if isinstance(hist, list) else [hist]
    assert all(isinstance(h, np.ndarray) and h.ndim == 1 and h.size for h in arrays), \
        "objective_history_ is a 1-d array, or a list of them (one per class, output or run)"
    assert isinstance(est.n_iter_, int)
