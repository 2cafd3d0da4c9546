"""The estimator registry: every public estimator and transformer of kernelscale, once.

The demo (``kernelscale demo``), the shared test configurations (``tests/estimator_list.py``,
which feed scikit-learn's checks, the conventions battery and the save/load round trips) and
the estimator table of docs/choosing.md are all checked against :data:`ESTIMATORS` by
``tests/test_registry.py``: an estimator added here without a demo entry, a test
configuration or a line in docs/choosing.md fails the suite.
"""

from __future__ import annotations

from dataclasses import dataclass

from .auto import AutoKernelClassifier, AutoKernelRegressor
from .doubly_stochastic import DoublyStochasticClassifier, DoublyStochasticRegressor
from .exact import ExactKernelRidge
from .features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures
from .least_squares import (
    CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier, StagewiseClassifier, StagewiseRegressor,
)
from .lssvm import LSSVMClassifier, LSSVMRegressor
from .regularized import RegularizedKernelClassifier, RegularizedKernelRegressor
from .slkl import SLKLClassifier, SLKLRegressor

__all__ = ["Entry", "ESTIMATORS", "by_name"]


@dataclass(frozen=True)
class Entry:
    """One estimator: its class, the method (paper) it implements, and what it is."""

    cls: type
    method: str
    kind: str  # "classifier", "regressor" or "transformer"

    @property
    def name(self):
        return self.cls.__name__


ESTIMATORS = (
    Entry(AutoKernelClassifier, "front door", "classifier"),
    Entry(AutoKernelRegressor, "front door", "regressor"),
    Entry(SLKLRegressor, "1. SLKL", "regressor"),
    Entry(SLKLClassifier, "1. SLKL", "classifier"),
    Entry(DoublyStochasticRegressor, "2. doubly stochastic gradients", "regressor"),
    Entry(DoublyStochasticClassifier, "2. doubly stochastic gradients", "classifier"),
    Entry(RegularizedKernelRegressor, "3. fixed point and coordinate descent", "regressor"),
    Entry(RegularizedKernelClassifier, "3. fixed point and coordinate descent", "classifier"),
    Entry(LSSVMRegressor, "4. randomized LS-SVM", "regressor"),
    Entry(LSSVMClassifier, "4. randomized LS-SVM", "classifier"),
    Entry(GeneralizedLeastSquaresClassifier, "5. least squares revisited", "classifier"),
    Entry(CalibratedLeastSquaresClassifier, "5. least squares revisited", "classifier"),
    Entry(StagewiseRegressor, "5. least squares revisited", "regressor"),
    Entry(StagewiseClassifier, "5. least squares revisited", "classifier"),
    Entry(ExactKernelRidge, "ground truth", "regressor"),
    Entry(RandomFourierFeatures, "feature maps", "transformer"),
    Entry(PolynomialRandomFeatures, "feature maps", "transformer"),
    Entry(NystromFeatures, "feature maps", "transformer"),
)


def by_name(name):
    """The registry entry of the estimator class called ``name``."""
    for entry in ESTIMATORS:
        if entry.name == name:
            return entry
    raise KeyError(f"{name!r} is not a kernelscale estimator; the estimators are "
                   f"{', '.join(e.name for e in ESTIMATORS)}.")
