"""Every public estimator and transformer, in the small configuration the shared tests use.

A new estimator joins scikit-learn's estimator checks (test_estimator_checks.py) and the
save/load round trip (test_persistence.py) by being listed here.
"""

from kernelscale.exact import ExactKernelRidge
from kernelscale.features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures
from kernelscale.kernels import GaussianKernel

ESTIMATORS = [
    ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.1),
    ExactKernelRidge(kernel="gaussian", alpha=1.0),
    RandomFourierFeatures(n_components=64, random_state=0),
    PolynomialRandomFeatures(n_components=64, random_state=0),
    NystromFeatures(n_components=20, random_state=0),
]
