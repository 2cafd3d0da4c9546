"""The first call of a method in a process loads compiled code before planning and counts it
(kernelscale.base.warmup): the budget the call plans with is smaller by what loading took."""

import mmap
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator

import kernelscale as ks
from kernelscale.base import warmup
from kernelscale.base.boundary import BoundaryMixin
from kernelscale.ops.memory import budget_cap, parse_memory

LOADED = []  # what the fake estimator's first fit "loads" (kept for the process's lifetime)
LOAD_BYTES = 64 * 2**20


class FakeCompiled(BoundaryMixin, BaseEstimator):
    """Its first fit in a process keeps LOAD_BYTES resident, as loading compiled code does."""

    _warm_params = {"n_iter": 1}

    def __init__(self, max_memory=None, n_iter=10, random_state=None):
        self.max_memory = max_memory
        self.n_iter = n_iter
        self.random_state = random_state

    def fit(self, X, y=None):
        if not LOADED:
            # fresh anonymous pages, touched: resident whatever the heap already holds (freed
            # memory that malloc kept could serve a numpy array without growing the resident set)
            pages = mmap.mmap(-1, LOAD_BYTES)
            pages.write(b"\1" * LOAD_BYTES)
            LOADED.append(pages)
        self.fits_ = getattr(self, "fits_", 0) + 1
        self.budget_ = parse_memory(self.max_memory)
        return self


def test_cap_bounds_every_budget_and_nests():
    with budget_cap(10**8):
        assert parse_memory("1GB") == 10**8
        assert parse_memory(5 * 10**7) == 5 * 10**7
        with budget_cap(2 * 10**8):
            assert parse_memory("1GB") == 10**8  # an inner cap never raises the outer one
    assert parse_memory("1GB") == 10**9


def _in_a_fresh_process(scenario):
    """Run ``scenario`` (a function of this module) in a new interpreter: what the tests before it
    left in this process (loaded libraries, the allocator's free pages) must not decide what a
    first call measures."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import {Path(__file__).stem} as t; t.{scenario.__name__}()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def _first_fit_plans_with_the_budget_less_the_loading():
    X = np.zeros((50, 3))
    first = FakeCompiled(max_memory="1GB").fit(X)
    assert first.fits_ == 1  # the warm-up fitted a copy, not this estimator
    assert 10**9 - 1.3 * LOAD_BYTES < first.budget_ <= 10**9 - LOAD_BYTES, first.budget_
    second = FakeCompiled(max_memory="1GB").fit(X)
    assert second.budget_ == 10**9  # loaded once per process
    # another dtype is another first call, but nothing is left to load
    assert FakeCompiled(max_memory="1GB").fit(X.astype(np.float32)).budget_ == 10**9


def _loading_larger_than_the_budget_is_refused():
    with pytest.raises(ValueError, match=r"max_memory=.*too small for the first fit of FakeCompiled.*loading"):
        FakeCompiled(max_memory=LOAD_BYTES // 2).fit(np.zeros((50, 3)))


def test_first_fit_plans_with_the_budget_less_the_loading():
    _in_a_fresh_process(_first_fit_plans_with_the_budget_less_the_loading)


def test_loading_larger_than_the_budget_is_refused():
    _in_a_fresh_process(_loading_larger_than_the_budget_is_refused)


def test_warm_up_leaves_the_callers_generator_and_result_alone(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)

    def fit():
        state = np.random.RandomState(3)
        model = ks.DoublyStochasticClassifier(n_iter=5, max_memory="400MB", random_state=state).fit(X, y)
        return model.decision_function(X), state.randint(10**9)

    monkeypatch.setattr(warmup, "_WARMED", set())
    scores_first, draw_first = fit()  # with its warm-up
    scores_again, draw_again = fit()  # without
    np.testing.assert_allclose(scores_first, scores_again, rtol=1e-12, atol=1e-12)
    assert draw_first == draw_again


def _small_budget_leaves_the_cosine_to_numpy():
    from kernelscale.ops import fast_cos

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 8))
    y = X[:, 0] + 0.1 * rng.normal(size=3000)
    small = ks.DoublyStochasticRegressor(n_iter=4, block_size=512, batch_size=1024, max_memory="200MB",
                                         random_state=0).fit(X, y)
    assert not fast_cos.loaded() and "numba" not in sys.modules  # 96 MiB of code > a third of 200 MB
    large = ks.DoublyStochasticRegressor(n_iter=4, block_size=512, batch_size=1024, max_memory="2GB",
                                         random_state=0).fit(X, y)
    assert fast_cos.loaded()
    np.testing.assert_allclose(small.predict(X), large.predict(X), rtol=1e-10, atol=1e-10)
    again = ks.DoublyStochasticRegressor(n_iter=4, block_size=512, batch_size=1024, max_memory="200MB",
                                         random_state=0).fit(X, y)  # loaded now: it costs nothing more
    np.testing.assert_allclose(again.predict(X), large.predict(X), rtol=1e-10, atol=1e-10)


def test_small_budget_leaves_the_cosine_to_numpy():
    pytest.importorskip("numba")
    _in_a_fresh_process(_small_budget_leaves_the_cosine_to_numpy)


def test_numpy_only_computes_the_same_cosine_without_loading():
    from kernelscale.ops import fast_cos

    a = np.random.default_rng(1).normal(scale=50, size=(256, 512))
    with fast_cos.numpy_only():
        inside = fast_cos.cos_inplace(a.copy(), np.zeros(512), 2.0)
    np.testing.assert_allclose(inside, 2.0 * np.cos(a), rtol=0, atol=1e-15)
    if not fast_cos.loaded():
        with fast_cos.numpy_only():
            assert not fast_cos.available()
