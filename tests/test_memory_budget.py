"""The budget is resolved once per call at the estimator boundary: with ``max_memory=None`` a fit
(or a prediction) reads the free memory once, however many solvers, classes or pairs it plans
for, so the budget cannot drift while the fit allocates (kernelscale.ops.memory.one_reading)."""

import warnings

import numpy as np
import pytest
from estimator_list import ESTIMATORS
from sklearn.base import clone, is_classifier, is_regressor

import kernelscale.ops.memory as memory_module
from kernelscale import RegularizedKernelClassifier, SLKLClassifier
from kernelscale.ops.memory import DEFAULT_MEMORY_FRACTION, default_memory_budget, one_reading


class DriftingMemory:
    """A free-memory reading that falls by 1 MiB at every call."""

    def __init__(self, start=8 * 2**30):
        self.calls, self.start = 0, start

    def __call__(self):
        self.calls += 1
        return self.start - self.calls * 2**20


@pytest.fixture
def drifting(monkeypatch):
    reading = DriftingMemory()
    monkeypatch.setattr(memory_module, "available_memory", reading)
    return reading


def test_one_reading_holds_the_first_reading_for_the_block(drifting):
    outside = [default_memory_budget(), default_memory_budget()]
    assert outside[0] != outside[1]
    with one_reading():
        first = default_memory_budget()
        with one_reading():  # nested: the outer block's reading
            assert default_memory_budget() == first
        assert default_memory_budget() == first
    assert default_memory_budget() != first


_WITH_BUDGET = [e for e in ESTIMATORS if "max_memory" in e.get_params(deep=False)]


@pytest.mark.parametrize("estimator", _WITH_BUDGET, ids=lambda e: type(e).__name__)
def test_a_fit_and_a_prediction_read_the_free_memory_at_most_once(estimator, drifting):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 3))
    y = np.digitize(X[:, 0], [-0.5, 0.5]) if is_classifier(estimator) else np.sin(X[:, 0])
    est = clone(estimator).set_params(max_memory=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y) if (is_classifier(est) or is_regressor(est)) else est.fit(X)
    assert drifting.calls <= 1
    before = drifting.calls
    method = next(m for m in ("decision_function", "predict", "transform") if hasattr(est, m))
    getattr(est, method)(X)
    assert drifting.calls - before <= 1


@pytest.mark.parametrize("estimator", [
    RegularizedKernelClassifier(multi_class="ovo", max_iter=50, random_state=0),
    SLKLClassifier(multi_class="ovo", n_components=20, random_state=0),
], ids=lambda e: type(e).__name__)
def test_a_one_vs_one_fit_plans_every_pair_with_the_first_reading(estimator, drifting, monkeypatch):
    """Six pairs of four classes, one reading: the model equals a fit with max_memory fixed to
    that reading."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(160, 2))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    drifting_fit = clone(estimator).fit(X, y)
    assert drifting.calls == 1
    reading = int(DEFAULT_MEMORY_FRACTION * (drifting.start - 2**20))  # the first reading's budget
    fixed_fit = clone(estimator).set_params(max_memory=reading).fit(X, y)
    np.testing.assert_allclose(drifting_fit.decision_function(X), fixed_fit.decision_function(X), rtol=1e-12,
                               atol=1e-12)
