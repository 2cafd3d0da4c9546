"""kernelscale: scalable kernel machines that never build the n x n kernel matrix."""

from . import ops, preprocessing
from .data.datasets import (
    DATASETS, DatasetNotFoundError, coulomb_features, load_dataset, load_file, make_sinc, split_dataset,
    verify_dataset,
)
from .data.virtual_digits import VirtualDigits
from .doubly_stochastic.estimators import DoublyStochasticClassifier, DoublyStochasticRegressor
from .exact import ExactKernelRidge, exact_lssvm, kernel_predict, kernel_ridge_dual, kernel_ridge_objective
from .features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures, SeededFeatureMap
from .least_squares.estimators import CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier
from .kernels import (
    GaussianKernel,
    Kernel,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    make_kernel,
    median_heuristic,
)
from .lssvm.estimators import LSSVMClassifier, LSSVMRegressor, solve_lssvm
from .persistence import PersistenceWarning, describe, load, save
from .slkl.estimators import SLKLClassifier, SLKLRegressor
from .regularized.estimators import RegularizedKernelClassifier, RegularizedKernelRegressor
from .simplex import project_hypercube, project_simplex
from .least_squares.stagewise import StagewiseClassifier, StagewiseRegressor

__version__ = "0.1.0"

__all__ = [
    "ops",
    "preprocessing",
    # kernels
    "Kernel",
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "PolynomialKernel",
    "LinearKernel",
    "make_kernel",
    "median_heuristic",
    # features
    "RandomFourierFeatures",
    "PolynomialRandomFeatures",
    "NystromFeatures",
    "SeededFeatureMap",
    # exact solvers
    "ExactKernelRidge",
    "kernel_ridge_dual",
    "exact_lssvm",
    "kernel_predict",
    "kernel_ridge_objective",
    # stochastic low-rank kernel learning (paper 1)
    "SLKLRegressor",
    "SLKLClassifier",
    # doubly stochastic functional gradients (paper 2)
    "DoublyStochasticRegressor",
    "DoublyStochasticClassifier",
    # fixed-point and coordinate-descent solvers (paper 3)
    "RegularizedKernelClassifier",
    "RegularizedKernelRegressor",
    # randomized LS-SVM (paper 4)
    "LSSVMClassifier",
    "LSSVMRegressor",
    "solve_lssvm",
    # least squares revisited (paper 5)
    "GeneralizedLeastSquaresClassifier",
    "CalibratedLeastSquaresClassifier",
    "StagewiseClassifier",
    "StagewiseRegressor",
    "project_simplex",
    "project_hypercube",
    # data
    "DATASETS",
    "DatasetNotFoundError",
    "coulomb_features",
    "load_dataset",
    "VirtualDigits",
    "load_file",
    "make_sinc",
    "split_dataset",
    "verify_dataset",
    # persistence
    "save",
    "load",
    "describe",
    "PersistenceWarning",
]
