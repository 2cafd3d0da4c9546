"""The front door: estimators that choose the method, its capacity and its hyperparameters
within a time budget (:mod:`kernelscale.auto.estimators`), by the rules of
:mod:`kernelscale.auto.plan` and the search of :mod:`kernelscale.auto.search`."""

from .compare import compare
from .estimators import AutoKernelClassifier, AutoKernelRegressor

__all__ = ["AutoKernelClassifier", "AutoKernelRegressor", "compare"]
