"""Every public estimator and transformer, in the small configuration the shared tests use.

A new estimator joins scikit-learn's estimator checks (test_estimator_checks.py) and the
save/load round trip (test_persistence.py) by being listed here.
"""

from kernelscale.exact import ExactKernelRidge
from kernelscale.features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures
from kernelscale.kernels import GaussianKernel
from kernelscale.least_squares import CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier
from kernelscale.stagewise import StagewiseClassifier, StagewiseRegressor

ESTIMATORS = [
    ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.1),
    ExactKernelRidge(kernel="gaussian", alpha=1.0),
    RandomFourierFeatures(n_components=64, random_state=0),
    PolynomialRandomFeatures(n_components=64, random_state=0),
    NystromFeatures(n_components=20, random_state=0),
    GeneralizedLeastSquaresClassifier(max_iter=20),
    GeneralizedLeastSquaresClassifier(link="identity"),
    CalibratedLeastSquaresClassifier(max_iter=10),
    StagewiseClassifier(block_size=24, n_stages=3, pca_components=None, random_state=0),
    StagewiseClassifier("logit", block_size=12, n_stages=2, update="logistic", inner_iter=5, pca_components=2,
                        random_state=0),
    StagewiseRegressor(block_size=24, n_stages=3, pca_components=None, random_state=0),
    StagewiseRegressor("polynomial", block_size=12, n_stages=2, update="calibrated", pca_components=None,
                       random_state=0),
]
